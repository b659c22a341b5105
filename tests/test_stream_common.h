/* What the stream tests (test_stream_staged.c, test_stream_fixed.c) share. */
#ifndef OPENDS_TEST_STREAM_COMMON_H
#define OPENDS_TEST_STREAM_COMMON_H

#include "common.h"

#define SENT ((ssize_t)-12345)
#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

struct sop {
	size_t size;
	off_t foff, boff;
	ssize_t res;
};

/* More streams than a GPU has hardware queues (64), each registered with
 * flags (0: not registered) and with three reads of L bytes of the file
 * behind fh (fsize bytes, oracle) queued, all at once; byte-exact. */
static inline void t_many_streams(opends_handle_t fh, const uint8_t *oracle, size_t fsize, size_t L, unsigned flags)
{
	enum { NS = 64, PER = 3 };
	opends_stream_t st[NS];
	static struct sop o[NS][PER];
	uint8_t *buf = t_xmalloc((size_t)NS * PER * L);
	for (int i = 0; i < NS; i++) {
		OK(opends_stream_create(&st[i]));
		if (flags)
			OK(opends_stream_register(st[i], flags));
	}
	for (int j = 0; j < PER; j++)
		for (int i = 0; i < NS; i++) {
			size_t k = (size_t)i * PER + (size_t)j;
			o[i][j] = (struct sop){ L, (off_t)(k * 131071 % (fsize - L)), (off_t)(k * L), SENT };
			OK(opends_stream_read(fh, buf, &o[i][j].size, &o[i][j].foff, &o[i][j].boff, &o[i][j].res, st[i]));
		}
	for (int i = NS - 1; i >= 0; i--)
		OK(opends_stream_synchronize(st[i]));
	for (int i = 0; i < NS; i++) {
		for (int j = 0; j < PER; j++) {
			size_t k = (size_t)i * PER + (size_t)j;
			CHECKF(o[i][j].res == (ssize_t)L, "stream %d op %d gave %zd", i, j, o[i][j].res);
			VERIFY(buf + k * L, oracle + o[i][j].foff, L, "stream %d op %d", i, j);
		}
		OK(opends_stream_destroy(st[i]));
	}
	free(buf);
}

#endif
