/*
 * cuFile's statistics (cuFileSetStatsLevel ... cuFileGetStatsL3), kept by
 * the drop-in for the calls it serves. Off (level 0, cuFile's default)
 * they cost the calls one relaxed load; on, an atomic add per counter and
 * two clock reads per read or write. docs/cufile-dropin.md says which
 * fields are counted and how the derived ones are computed.
 *
 * The level is cuFile's PROFILE_STATS parameter (config.c: set through
 * the API or cufile.json's profile.cufile_stats); counting runs while the
 * level is 1 or more and cuFileStatsStop has not stopped it (a program
 * that configures the level and never calls cuFileStatsStart is counted,
 * as cuFile counts one whose cufile.json sets the level).
 */
#include <string.h>
#include <time.h>

#include "dropin.h"

/* The statistics structures, which OpenDS's cufile.h leaves opaque: their
 * layout as cuFile 1.20 declares it (the sizes and offsets asserted below
 * were measured against NVIDIA's header). */
typedef struct CUfileOpCounter {
	uint64_t ok, err;
} CUfileOpCounter_t;

struct CUfileStatsLevel1 {
	CUfileOpCounter_t read_ops, write_ops, hdl_register_ops, hdl_deregister_ops, buf_register_ops,
		buf_deregister_ops;
	uint64_t read_bytes, write_bytes, read_bw_bytes_per_sec, write_bw_bytes_per_sec, read_lat_avg_us,
		write_lat_avg_us, read_ops_per_sec, write_ops_per_sec, read_lat_sum_us, write_lat_sum_us;
	CUfileOpCounter_t batch_submit_ops, batch_complete_ops, batch_setup_ops, batch_cancel_ops,
		batch_destroy_ops, batch_enqueued_ops, batch_posix_enqueued_ops, batch_processed_ops,
		batch_posix_processed_ops, batch_nvfs_submit_ops, batch_p2p_submit_ops, batch_aio_submit_ops,
		batch_iouring_submit_ops, batch_mixed_io_submit_ops, batch_total_submit_ops;
	uint64_t batch_read_bytes, batch_write_bytes, batch_read_bw_bytes, batch_write_bw_bytes,
		batch_submit_lat_avg_us, batch_completion_lat_avg_us, batch_submit_ops_per_sec,
		batch_complete_ops_per_sec, batch_submit_lat_sum_us, batch_completion_lat_sum_us,
		last_batch_read_bytes, last_batch_write_bytes;
	CUfileOpCounter_t readv_ops, writev_ops;
	uint64_t readv_bytes, writev_bytes, readv_bw_bytes_per_sec, writev_bw_bytes_per_sec, readv_lat_avg_us,
		writev_lat_avg_us, readv_ops_per_sec, writev_ops_per_sec, readv_lat_sum_us, writev_lat_sum_us;
};

struct CUfileStatsLevel2 {
	struct CUfileStatsLevel1 basic;
	uint64_t read_size_kb_hist[32], write_size_kb_hist[32];
};

typedef struct CUfilePerGpuStats {
	char uuid[16];
	uint64_t read_bytes, read_bw_bytes_per_sec, read_utilization, read_duration_us, n_total_reads, n_p2p_reads,
		n_nvfs_reads, n_posix_reads, n_unaligned_reads, n_dr_reads, n_sparse_regions, n_inline_regions,
		n_reads_err;
	uint64_t writes_bytes, write_bw_bytes_per_sec, write_utilization, write_duration_us, n_total_writes,
		n_p2p_writes, n_nvfs_writes, n_posix_writes, n_unaligned_writes, n_dr_writes, n_writes_err;
	uint64_t n_mmap, n_mmap_ok, n_mmap_err, n_mmap_free, reg_bytes;
} CUfilePerGpuStats_t;

struct CUfileStatsLevel3 {
	struct CUfileStatsLevel2 detailed;
	uint32_t num_gpus;
	CUfilePerGpuStats_t per_gpu_stats[16];
};

#include <stddef.h>
_Static_assert(sizeof(struct CUfileStatsLevel1) == 624 && sizeof(struct CUfileStatsLevel2) == 1136 &&
		       sizeof(struct CUfileStatsLevel3) == 5112 && sizeof(CUfilePerGpuStats_t) == 248,
	       "cuFile 1.20's statistics sizes");
_Static_assert(offsetof(struct CUfileStatsLevel1, batch_submit_ops) == 176 &&
		       offsetof(struct CUfileStatsLevel1, last_batch_write_bytes) == 504 &&
		       offsetof(struct CUfileStatsLevel1, readv_ops) == 512 &&
		       offsetof(struct CUfileStatsLevel1, writev_lat_sum_us) == 616 &&
		       offsetof(struct CUfileStatsLevel2, write_size_kb_hist) == 880 &&
		       offsetof(struct CUfileStatsLevel3, num_gpus) == 1136 &&
		       offsetof(struct CUfileStatsLevel3, per_gpu_stats) == 1144 &&
		       offsetof(CUfilePerGpuStats_t, writes_bytes) == 120 && offsetof(CUfilePerGpuStats_t, reg_bytes) == 240,
	       "cuFile 1.20's statistics offsets");

/* The switch: counting runs (level 1 or more, not stopped). Read with
 * one relaxed load by every counted call; written, with stopped and
 * ever_on, only under cfd_lock together with the level it follows
 * (cfd_stats_refresh_locked), so that concurrent cuFileSetStatsLevel,
 * Start and Stop calls always leave the switch as the last level and
 * stop/start say (two level changes racing once could leave level 2 with
 * counting off). */
atomic_bool cfd_stats_active;
static bool stopped;
/* Counting ran at some point (NVIDIA 1.15.1 answers cuFileStatsStart at
 * level 0 with INTERNAL_ERROR when statistics never ran, and with success
 * once they had, then were set back to 0: cufile_prog's stats_start_open
 * 5030 and cufile_stats' stats_start_level_0 0 on the H200, 2026-12-01). */
static bool ever_on;

typedef _Atomic uint64_t ctr;
struct opc {
	ctr ok, err;
};
static struct {
	struct opc op[CFD_ST_N];
	ctr read_bytes, write_bytes, read_lat, write_lat;
	ctr readv_bytes, writev_bytes, readv_lat, writev_lat;
	ctr batch_entries, batch_read_bytes, batch_write_bytes, batch_submit_lat;
	ctr last_batch_read_bytes, last_batch_write_bytes;
	ctr read_hist[32], write_hist[32];
	ctr start_us; /* when counting started, for the per-second figures */
} st;

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

uint64_t cfd_stats_t0(void)
{
	return now_us();
}

/* Whether counting runs: level 1 or more, not stopped. */
void cfd_stats_refresh_locked(int level)
{
	bool on = level >= 1 && !stopped;
	if (on && !atomic_load(&cfd_stats_active) && !atomic_load(&st.start_us))
		atomic_store(&st.start_us, now_us());
	ever_on |= on;
	atomic_store(&cfd_stats_active, on);
}

static void add(ctr *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

void cfd_stats_op(enum cfd_stat_op op, bool ok)
{
	add(ok ? &st.op[op].ok : &st.op[op].err, 1);
}

/* Sizes in KiB by powers of two: bucket i holds [2^i, 2^(i+1)) KiB,
 * smaller than 1 KiB in bucket 0, 2^31 KiB and more in bucket 31. */
static unsigned bucket(size_t bytes)
{
	size_t kb = bytes >> 10;
	unsigned b = 0;
	while (kb > 1 && b < 31) {
		kb >>= 1;
		b++;
	}
	return b;
}

void cfd_stats_io(enum cfd_stat_op op, ssize_t r, size_t size, uint64_t t0)
{
	uint64_t lat = now_us() - t0;
	bool write = op == CFD_ST_WRITE || op == CFD_ST_WRITEV;
	bool vec = op == CFD_ST_READV || op == CFD_ST_WRITEV;
	cfd_stats_op(op, r >= 0);
	add(vec ? (write ? &st.writev_lat : &st.readv_lat) : (write ? &st.write_lat : &st.read_lat), lat);
	if (r < 0)
		return;
	add(vec ? (write ? &st.writev_bytes : &st.readv_bytes) : (write ? &st.write_bytes : &st.read_bytes),
	    (uint64_t)r);
	if (!vec)
		add(write ? &st.write_hist[bucket(size)] : &st.read_hist[bucket(size)], 1);
}

void cfd_stats_submit(unsigned nr, const CUfileIOParams_t *p, bool ok, uint64_t t0)
{
	cfd_stats_op(CFD_ST_BATCH_SUBMIT, ok);
	add(&st.batch_submit_lat, now_us() - t0);
	if (!ok)
		return;
	uint64_t rb = 0, wb = 0;
	for (unsigned i = 0; i < nr; i++)
		*(p[i].opcode == CUFILE_WRITE ? &wb : &rb) += p[i].u.batch.size;
	add(&st.batch_entries, nr);
	add(&st.batch_read_bytes, rb);
	add(&st.batch_write_bytes, wb);
	atomic_store(&st.last_batch_read_bytes, rb);
	atomic_store(&st.last_batch_write_bytes, wb);
}

void cfd_stats_events(const CUfileIOEvents_t *ev, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		cfd_stats_op(CFD_ST_BATCH_COMPLETE, ev[i].status == CUFILE_COMPLETE);
}

/* ---- the API ------------------------------------------------------------- */

static CUfileError_t driver(void)
{
	return cfd_st(atomic_load(&cfd_is_open) ? CU_FILE_SUCCESS : CU_FILE_DRIVER_NOT_INITIALIZED, 0);
}

EXPORT CUfileError_t cuFileSetStatsLevel(int level)
{
	if (level < 0 || level > 3)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	cfd_config_set_stats_level(level); /* and the switch, under cfd_lock */
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetStatsLevel(int *level)
{
	if (!level)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	*level = cfd_config_stats_level();
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileStatsStart(void)
{
	CUfileError_t e = driver();
	if (e.err)
		return e;
	pthread_mutex_lock(&cfd_lock);
	int level = cfd_config_stats_level_locked();
	if (level < 1 && !ever_on) {
		e = cfd_st(CU_FILE_INTERNAL_ERROR, 0); /* see ever_on */
	} else {
		stopped = false;
		cfd_stats_refresh_locked(level);
	}
	pthread_mutex_unlock(&cfd_lock);
	return e;
}

EXPORT CUfileError_t cuFileStatsStop(void)
{
	CUfileError_t e = driver();
	if (e.err)
		return e;
	pthread_mutex_lock(&cfd_lock);
	stopped = true;
	cfd_stats_refresh_locked(cfd_config_stats_level_locked());
	pthread_mutex_unlock(&cfd_lock);
	return e;
}

EXPORT CUfileError_t cuFileStatsReset(void)
{
	CUfileError_t e = driver();
	if (e.err)
		return e;
	pthread_mutex_lock(&cfd_lock);
	ctr *c = (ctr *)&st;
	for (size_t i = 0; i < sizeof(st) / sizeof(ctr); i++)
		atomic_store_explicit(&c[i], 0, memory_order_relaxed);
	if (atomic_load(&cfd_stats_active))
		atomic_store(&st.start_us, now_us());
	pthread_mutex_unlock(&cfd_lock);
	return e;
}

static uint64_t ld(ctr *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void pair(CUfileOpCounter_t *o, enum cfd_stat_op op)
{
	o->ok = ld(&st.op[op].ok);
	o->err = ld(&st.op[op].err);
}

static uint64_t per_s(uint64_t n, uint64_t us)
{
	return us ? (uint64_t)((double)n * 1e6 / (double)us) : 0;
}

static void fill_l1(CUfileStatsLevel1_t *s)
{
	memset(s, 0, sizeof(*s));
	uint64_t start = ld(&st.start_us), el = start ? now_us() - start : 0;
	pair(&s->read_ops, CFD_ST_READ);
	pair(&s->write_ops, CFD_ST_WRITE);
	pair(&s->hdl_register_ops, CFD_ST_HDL_REG);
	pair(&s->hdl_deregister_ops, CFD_ST_HDL_DEREG);
	pair(&s->buf_register_ops, CFD_ST_BUF_REG);
	pair(&s->buf_deregister_ops, CFD_ST_BUF_DEREG);
	uint64_t nr = s->read_ops.ok + s->read_ops.err, nw = s->write_ops.ok + s->write_ops.err;
	s->read_bytes = ld(&st.read_bytes);
	s->write_bytes = ld(&st.write_bytes);
	s->read_lat_sum_us = ld(&st.read_lat);
	s->write_lat_sum_us = ld(&st.write_lat);
	s->read_bw_bytes_per_sec = per_s(s->read_bytes, s->read_lat_sum_us);
	s->write_bw_bytes_per_sec = per_s(s->write_bytes, s->write_lat_sum_us);
	s->read_lat_avg_us = nr ? s->read_lat_sum_us / nr : 0;
	s->write_lat_avg_us = nw ? s->write_lat_sum_us / nw : 0;
	s->read_ops_per_sec = per_s(nr, el);
	s->write_ops_per_sec = per_s(nw, el);
	pair(&s->batch_submit_ops, CFD_ST_BATCH_SUBMIT);
	pair(&s->batch_complete_ops, CFD_ST_BATCH_COMPLETE);
	pair(&s->batch_setup_ops, CFD_ST_BATCH_SETUP);
	pair(&s->batch_cancel_ops, CFD_ST_BATCH_CANCEL);
	pair(&s->batch_destroy_ops, CFD_ST_BATCH_DESTROY);
	s->batch_enqueued_ops.ok = ld(&st.batch_entries);
	s->batch_processed_ops = s->batch_complete_ops;
	s->batch_total_submit_ops = s->batch_submit_ops;
	s->batch_read_bytes = ld(&st.batch_read_bytes);
	s->batch_write_bytes = ld(&st.batch_write_bytes);
	s->batch_read_bw_bytes = per_s(s->batch_read_bytes, el);
	s->batch_write_bw_bytes = per_s(s->batch_write_bytes, el);
	uint64_t ns = s->batch_submit_ops.ok + s->batch_submit_ops.err;
	uint64_t nc = s->batch_complete_ops.ok + s->batch_complete_ops.err;
	s->batch_submit_lat_sum_us = ld(&st.batch_submit_lat);
	s->batch_submit_lat_avg_us = ns ? s->batch_submit_lat_sum_us / ns : 0;
	s->batch_submit_ops_per_sec = per_s(ns, el);
	s->batch_complete_ops_per_sec = per_s(nc, el);
	s->last_batch_read_bytes = ld(&st.last_batch_read_bytes);
	s->last_batch_write_bytes = ld(&st.last_batch_write_bytes);
	pair(&s->readv_ops, CFD_ST_READV);
	pair(&s->writev_ops, CFD_ST_WRITEV);
	uint64_t nrv = s->readv_ops.ok + s->readv_ops.err, nwv = s->writev_ops.ok + s->writev_ops.err;
	s->readv_bytes = ld(&st.readv_bytes);
	s->writev_bytes = ld(&st.writev_bytes);
	s->readv_lat_sum_us = ld(&st.readv_lat);
	s->writev_lat_sum_us = ld(&st.writev_lat);
	s->readv_bw_bytes_per_sec = per_s(s->readv_bytes, s->readv_lat_sum_us);
	s->writev_bw_bytes_per_sec = per_s(s->writev_bytes, s->writev_lat_sum_us);
	s->readv_lat_avg_us = nrv ? s->readv_lat_sum_us / nrv : 0;
	s->writev_lat_avg_us = nwv ? s->writev_lat_sum_us / nwv : 0;
	s->readv_ops_per_sec = per_s(nrv, el);
	s->writev_ops_per_sec = per_s(nwv, el);
}

static void fill_l2(CUfileStatsLevel2_t *s)
{
	fill_l1(&s->basic);
	for (int i = 0; i < 32; i++) {
		s->read_size_kb_hist[i] = ld(&st.read_hist[i]);
		s->write_size_kb_hist[i] = ld(&st.write_hist[i]);
	}
}

/* NULL, driver closed, level below the one asked, stopped: cuFile's
 * answers (stopped: INVALID_VALUE, as NVIDIA 1.15.1 answers
 * cufile_stats' stats_l1_stopped on the H200, 2026-12-01). */
static CUfileError_t get_check(const void *stats, int need)
{
	if (!stats)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	CUfileError_t e = driver();
	if (e.err)
		return e;
	pthread_mutex_lock(&cfd_lock);
	bool ok = cfd_config_stats_level_locked() >= need && !stopped;
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(ok ? CU_FILE_SUCCESS : CU_FILE_INVALID_VALUE, 0);
}

EXPORT CUfileError_t cuFileGetStatsL1(CUfileStatsLevel1_t *stats)
{
	CUfileError_t e = get_check(stats, 1);
	if (!e.err)
		fill_l1(stats);
	return e;
}

EXPORT CUfileError_t cuFileGetStatsL2(CUfileStatsLevel2_t *stats)
{
	CUfileError_t e = get_check(stats, 2);
	if (!e.err)
		fill_l2(stats);
	return e;
}

/* No per-GPU figures: OpenDS does not attribute its I/O to GPUs here. */
EXPORT CUfileError_t cuFileGetStatsL3(CUfileStatsLevel3_t *stats)
{
	CUfileError_t e = get_check(stats, 3);
	if (!e.err) {
		memset(stats, 0, sizeof(*stats));
		fill_l2(&stats->detailed);
		stats->num_gpus = 0;
	}
	return e;
}
