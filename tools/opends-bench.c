/*
 * opends-bench: how fast does OpenDS move my kind of data into GPU memory
 * on this machine, next to what the hardware allows and what the peers
 * (cuFile, KvikIO, plain POSIX) give?
 *
 * This file is the command line: options, their checks, and the order of
 * the run. The legs live in tools/bench/: legs.c (the four datasets),
 * callers.c (one thread, the ways users call), baselines.c (disk ceilings
 * and cuFile), output.c (records.csv, the terminal). docs/bench.md says
 * what each leg and ceiling measures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <opends.h>

#include "bench/bench.h"
#include "bench/gpu.h"
#include "bench_commit.h"

static const char *const all_modes[] = { "sync", "async", "stream", "batch", NULL };
static const char *const all_caches[] = { "cold", "hot", NULL };
static const char *const all_backends[] = { "auto", "ref", "uring", "gds", "none", NULL };
static const char *kvikio_script;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: opends-bench [options]\n"
		"Measures how fast OpenDS reads files into GPU memory (host memory without a GPU), next to\n"
		"ceilings and peers measured by the same command. Rows go to DIR/records.csv and stdout;\n"
		"bench/report DIR turns them into report.md and report.png. Method: docs/bench.md.\n"
		"\n"
		"  --quick             a short demo (a minute or so): small datasets, hot cache, every caller leg\n"
		"                      on a 256 MiB file, the best backend\n"
		"  --data DIR          where the generated datasets live (default opends-bench-data)\n"
		"  --out DIR           results folder: records.csv, machine.txt (default opends-bench-out)\n"
		"  --append            add to DIR/records.csv instead of starting it afresh\n"
		"  --datasets LIST     filesize8gib,tiktokish,imagenetish,lmcacheish, or none\n"
		"  --scale F           multiply file counts (sizes never change; default 1)\n"
		"  --modes LIST        dataset legs: sync,async,stream,batch\n"
		"  --callers LIST      caller legs: %s, all or none (default all)\n"
		"  --backends LIST     auto, ref, uring, gds, or none for ceilings and peers only (default auto)\n"
		"  --legs LIST         instead of --modes and --cache: DATASET:MODE:CACHE items, * for any,\n"
		"                      e.g. filesize8gib:sync:*,filesize8gib:stream:hot,imagenetish:*:*\n"
		"  --cache LIST        cold,hot: page cache dropped, or files read once first (default cold);\n"
		"                      DATASET:cold or DATASET:hot for one dataset only\n"
		"  --threads N         threads of the sync legs and their ceilings (default 8)\n"
		"  --leg-timeout S     seconds a leg may run; past it, it stops and is recorded as timed out\n"
		"                      (default 120; 0: no limit)\n"
		"  --hung-grace S      a leg still inside one call S seconds past its limit is recorded as\n"
		"                      hung and the command ends with exit status 3 (default 30)\n"
		"  --repeat N          runs per leg, median kept (default 0: 3 for legs under 1 s, else 1)\n"
		"  --big-size SIZE     the caller legs' big file, e.g. 8G, 256M (default 8G)\n"
		"  --write-size SIZE   bytes of the write legs (default: the big file's size)\n"
		"  --rand-reads N      reads of the rand4k leg (default 20000)\n"
		"  --mem host|device|auto   destination memory (default auto: device where a GPU is)\n"
		"  --stream-flags LIST stream legs once per value, streams registered with it (cuFile's\n"
		"                      cuFileStreamRegister flags, 0-7; 0 = unregistered; default 0);\n"
		"                      a value N != 0 is the mode stream:N\n"
		"  --source URL        seq16m and rand4k on a source handle (opends_handle_open_url, e.g.\n"
		"                      rados://POOL/OBJ?conf=PATH) instead of the caller legs' file\n"
		"  --source-size SIZE  the source object's bytes (read from offset 0)\n"
		"  --kvikio SCRIPT     run bench/kvikio_bench.py's same legs (before ours), into the same records\n"		"  --tag WORD          OpenDS rows as backend opends:NAME+WORD: an A/B run with other settings\n"
		"                      (e.g. OPENDS_* variables) beside the default one in the same records\n"
		"  --no-baselines      skip the ceilings and the peers (cuFile, plain POSIX)\n"
		"  --generate-only     create the datasets and stop\n"
		"  --quiet             no progress bar or dataset messages\n"
		"  --version, --help\n"
		"\n"
		"Dataset legs (dataset x mode x backend x cache; whole files in a random order, the same\n"
		"for every reader; opening and registering each file is timed):\n"
		"  sync    opends_sync_read from --threads threads      async   futures, the dataset's\n"
		"  stream  opends_stream_read, one stream per slot               concurrency in flight\n"
		"  batch   opends_batch_* with that concurrency\n"
		"Caller legs (one calling thread, hot data; each through OpenDS, the plain way 'posix':\n"
		"pread into pinned memory + one copy, and KvikIO with --kvikio; cuFile too for writes):\n"
		"  seq16m    the big file in sequential 16 MiB synchronous calls into one buffer\n"
		"  files1t   imagenetish one file after another: open, register, read, deregister, close\n"
		"  rand4k    4 KiB reads at random offsets of the big file, one at a time: p50/p99 us\n"
		"  write16m  the big file's size written from GPU memory to a new file, 16 MiB calls,\n"
		"            then fdatasync            write8t  the same by 8 threads, one range each\n"
		"  gpu1      the hot big file in one call       gpu2  the same into two GPUs at once\n"
		"  dev1      gpu1 into GPU 1 (GPU 1 against GPU 0, two-GPU machines)\n"
		"  fanout2   one call placing the file on two GPUs (where the library has that call)\n"
		"Ceilings (rows with backend ceiling-*, measured in the same command):\n"
		"  ceiling-disk   host-memory reads of the same files, same order: threads x pread (the sync\n"
		"                 legs' shape), one thread with io_uring 128 x 1 MiB deep (the library's own\n"
		"                 shape), 16 MiB requests for large files; every shape before the legs, the\n"
		"                 best again after them, the highest kept\n"
		"  ceiling-h2d    pinned host-to-GPU copy, best of 16/64/256 MiB copies (memcpy without GPU)\n"
		"  ceiling-host   buffered pread of the hot big file, 16 threads and all cores x 1 MiB\n"
		"  ceiling-write  pinned host memory written O_DIRECT, 1, 8 and 32 threads x 16 MiB, and io_uring\n"
		"                 1 x 32 and 8 x 16 writes of 1 MiB in flight; 8 threads of each into a range\n"
		"                 allocated first (fallocate, as the library does); + fdatasync\n"
		"  ceiling-h2d2   (two GPUs) pinned copies into both GPUs at once: with ceiling-host and 2 x gpu1,\n"
		"                 what bounds gpu2\n"
		"A ratio beside a row compares it with its ceiling; 'BEATS IT' marks a ceiling beaten by\n"
		"more than 5 %% (the ceiling was under-measured). +-N%%/R: spread of R runs around the median.\n",
		"seq16m,files1t,rand4k,write16m,write8t,gpu1,dev1,gpu2,fanout2");
}

/* Every item of a comma list must be one of allowed (or an extra word). */
static bool check_list(const char *opt_name, const char *list, const char *const *allowed, const char *extra)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", list);
	if (!buf[0]) {
		fprintf(stderr, "opends-bench: %s needs a value\n", opt_name);
		return false;
	}
	for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		bool ok = extra && in_list(extra, it);
		for (unsigned i = 0; !ok && allowed[i]; i++)
			ok = !strcmp(allowed[i], it);
		if (!ok) {
			fprintf(stderr, "opends-bench: unknown %s value '%s' (choose from ", opt_name, it);
			for (unsigned i = 0; allowed[i]; i++)
				fprintf(stderr, "%s%s", i ? "," : "", allowed[i]);
			fprintf(stderr, "%s%s)\n", extra ? "," : "", extra ? extra : "");
			return false;
		}
	}
	return true;
}

/* --legs: DATASET:MODE:CACHE items, each field a known name or '*' */
static bool check_legs(const char *list, const char *const *ds_names)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *m = strchr(it, ':'), *c = m ? strchr(m + 1, ':') : NULL;
		bool ok = m && c && !strchr(c + 1, ':');
		if (ok) {
			*m++ = '\0';
			*c++ = '\0';
			const char *const *lists[3] = { ds_names, all_modes, all_caches };
			const char *fields[3] = { it, m, c };
			for (unsigned f = 0; f < 3 && ok; f++) {
				bool hit = !strcmp(fields[f], "*");
				for (unsigned i = 0; !hit && lists[f][i]; i++)
					hit = !strcmp(lists[f][i], fields[f]);
				ok = hit;
			}
		}
		if (!ok) {
			fprintf(stderr, "opends-bench: --legs takes DATASET:MODE:CACHE items (each a name or *), e.g. "
					"imagenetish:sync:cold or filesize8gib:*:hot; not '%s'\n", list);
			return false;
		}
	}
	return true;
}

static bool parse_uint(const char *opt_name, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi) {
		fprintf(stderr, "opends-bench: %s takes a whole number in %u..%u, not '%s'\n", opt_name, lo, hi, s);
		return false;
	}
	*out = (unsigned)v;
	return true;
}

static bool parse_size(const char *opt_name, const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	uint64_t mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30, end++;
	if (errno || end == s || *end || v <= 0 || v * mul > (double)(1ull << 40)) {
		fprintf(stderr, "opends-bench: %s takes a size like 8G or 256M, not '%s'\n", opt_name, s);
		return false;
	}
	uint64_t b = (uint64_t)(v * mul);
	if (b < (16ull << 20) || b % (1u << 20)) {
		fprintf(stderr, "opends-bench: %s must be a whole number of MiB, at least 16M (got '%s')\n", opt_name, s);
		return false;
	}
	*out = b;
	return true;
}

static void run_kvikio(void)
{
	/* the peer's same legs, appended to our records (one command) */
	char cmd[8192];
	const char *py = getenv("PYTHON") ? getenv("PYTHON") : "python3";
	char big[32];
	snprintf(big, sizeof(big), "%" PRIu64, opt.big_size);
	char legs[1100] = "";
	if (opt.legs)
		snprintf(legs, sizeof(legs), " --legs '%s'", opt.legs);
	snprintf(cmd, sizeof(cmd),
		 "%s '%s'%s --data '%s' --out '%s' --datasets '%s' --cache '%s' --modes '%s' --callers '%s' "
		 "--big-size %s --write-size %" PRIu64 " --rand-reads %u --scale %g --threads %u --commit '%s'",
		 py, kvikio_script, legs, opt.data, opt.out, opt.datasets, opt.caches, opt.modes, opt.callers, big,
		 opt.write_size, opt.rand_reads, opt.scale, opt.threads, opt.commit);
	if (strchr(opt.data, '\'') || strchr(opt.out, '\'') || strchr(kvikio_script, '\'')) {
		fprintf(stderr, "opends-bench: --kvikio: paths with quotes are not passed to a shell\n");
		bench_failures++;
		return;
	}
	fflush(stdout);
	int rc = system(cmd);
	if (rc != 0) {
		fprintf(stderr, "opends-bench: %s exited with %d\n", kvikio_script, rc);
		bench_failures++;
	}
}

int main(int argc, char **argv)
{
	opt = (struct bench_opts){
		.data = "opends-bench-data",
		.out = "opends-bench-out",
		.datasets = "filesize8gib,tiktokish,imagenetish,lmcacheish",
		.modes = "sync,async,stream,batch",
		.backends = "auto",
		.caches = "cold",
		.mem = "auto",
		.callers = "all",
		.scale = 1.0,
		.threads = 8,
		.big_size = 8ull << 30,
		.rand_reads = 20000,
		.leg_timeout = 120,
		.hung_grace = 30,
		.baselines = true,
		.verbose = true,
	};
	snprintf(opt.commit, sizeof(opt.commit), "%s", BENCH_COMMIT);
	opt.n_stream_flags = 1; /* stream_flags[0] = 0: unregistered */
	static const struct option lo[] = {
		{ "quick", no_argument, 0, 'q' },	  { "data", required_argument, 0, 'd' },
		{ "out", required_argument, 0, 'o' },	  { "datasets", required_argument, 0, 'D' },
		{ "scale", required_argument, 0, 's' },  { "modes", required_argument, 0, 'm' },
		{ "backends", required_argument, 0, 'b' }, { "cache", required_argument, 0, 'c' },
		{ "threads", required_argument, 0, 't' }, { "mem", required_argument, 0, 'M' },
		{ "no-baselines", no_argument, 0, 'n' },  { "generate-only", no_argument, 0, 'g' },
		{ "quiet", no_argument, 0, 'Q' },	  { "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' },	  { "append", no_argument, 0, 'a' },
		{ "callers", required_argument, 0, 'C' }, { "repeat", required_argument, 0, 'r' },
		{ "big-size", required_argument, 0, 'B' }, { "rand-reads", required_argument, 0, 'R' },
		{ "write-size", required_argument, 0, 'W' }, { "kvikio", required_argument, 0, 'K' },
		{ "commit", required_argument, 0, 'H' },  { "stream-flags", required_argument, 0, 'F' },
		{ "leg-timeout", required_argument, 0, 'T' }, { "legs", required_argument, 0, 'L' },
		{ "source", required_argument, 0, 'U' },  { "source-size", required_argument, 0, 'Z' },
		{ "hung-grace", required_argument, 0, 'G' }, { "tag", required_argument, 0, 'A' },
		{ 0, 0, 0, 0 },
	};
	int c;
	/* --quick first sets its defaults; options after it override them */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--quick")) {
			opt.quick = true;
			opt.datasets = "imagenetish,lmcacheish,tiktokish";
			opt.scale = 0.02;
			opt.caches = "hot";
			opt.threads = 4;
			opt.big_size = 256ull << 20;
			opt.rand_reads = 2000;
			opt.write_size = 64ull << 20;
		}
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'q': break;
		case 'd': opt.data = optarg; break;
		case 'o': opt.out = optarg; break;
		case 'D': opt.datasets = optarg; break;
		case 's':
			errno = 0;
			opt.scale = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(opt.scale > 0 && opt.scale <= 1000)) {
				fprintf(stderr, "opends-bench: --scale takes a number in (0, 1000], not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'm': opt.modes = optarg; break;
		case 'b': opt.backends = optarg; break;
		case 'c': opt.caches = optarg; break;
		case 't':
			if (!parse_uint("--threads", optarg, 1, 256, &opt.threads))
				return 2;
			break;
		case 'M': opt.mem = optarg; break;
		case 'n': opt.baselines = false; break;
		case 'g': opt.gen_only = true; break;
		case 'Q': opt.verbose = false; break;
		case 'a': opt.append = true; break;
		case 'C': opt.callers = optarg; break;
		case 'r':
			if (!parse_uint("--repeat", optarg, 0, 32, &opt.repeat))
				return 2;
			break;
		case 'B':
			if (!parse_size("--big-size", optarg, &opt.big_size))
				return 2;
			break;
		case 'W':
			if (!parse_size("--write-size", optarg, &opt.write_size))
				return 2;
			break;
		case 'R':
			if (!parse_uint("--rand-reads", optarg, 10, 10000000, &opt.rand_reads))
				return 2;
			break;
		case 'F': {
			char buf[64];
			snprintf(buf, sizeof(buf), "%s", optarg);
			opt.n_stream_flags = 0;
			for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
				if (opt.n_stream_flags == 8 ||
				    !parse_uint("--stream-flags", it, 0, 7, &opt.stream_flags[opt.n_stream_flags]))
					return 2;
				opt.n_stream_flags++;
			}
			if (!opt.n_stream_flags) {
				fprintf(stderr, "opends-bench: --stream-flags needs values, e.g. 0,7\n");
				return 2;
			}
			break;
		}
		case 'L': opt.legs = optarg; break;
		case 'U': opt.source = optarg; break;
		case 'Z':
			if (!parse_size("--source-size", optarg, &opt.source_size))
				return 2;
			break;
		case 'T': {
			unsigned v;
			if (!parse_uint("--leg-timeout", optarg, 0, 86400, &v))
				return 2;
			opt.leg_timeout = v;
			break;
		}
		case 'G': {
			unsigned v;
			if (!parse_uint("--hung-grace", optarg, 1, 3600, &v))
				return 2;
			opt.hung_grace = v;
			break;
		}
		case 'A':
			opt.tag = optarg;
			if (!*optarg || strlen(optarg) > 32 || strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789=.-_") !=
									  strlen(optarg)) {
				fprintf(stderr, "opends-bench: --tag takes up to 32 of a-z 0-9 = . - _, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'K': kvikio_script = optarg; break;
		case 'H': snprintf(opt.commit, sizeof(opt.commit), "%s", optarg); break;
		case 'V': {
			unsigned maj, min, pat;
			opends_get_version(&maj, &min, &pat);
			printf("opends-bench %u.%u.%u (commit %s)\n", maj, min, pat, opt.commit);
			return 0;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!opt.write_size || opt.write_size > opt.big_size)
		opt.write_size = opt.big_size;
	if (optind < argc) {
		fprintf(stderr, "opends-bench: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	const char *ds_names[8];
	unsigned nds = 0;
	for (unsigned i = 0; i < ds_nspecs && nds < 7; i++)
		ds_names[nds++] = ds_specs[i].name;
	ds_names[nds] = NULL;
	char ds_caches[512] = ""; /* DATASET:cold and DATASET:hot, for --cache */
	for (unsigned i = 0; i < nds; i++)
		for (unsigned k = 0; all_caches[k]; k++)
			snprintf(ds_caches + strlen(ds_caches), sizeof(ds_caches) - strlen(ds_caches), "%s%s:%s",
				 ds_caches[0] ? "," : "", ds_names[i], all_caches[k]);
	if (!check_list("--datasets", opt.datasets, ds_names, "none") ||
	    !check_list("--modes", opt.modes, all_modes, NULL) || !check_list("--cache", opt.caches, all_caches, ds_caches) ||
	    !check_list("--backends", opt.backends, all_backends, NULL) ||
	    !check_list("--callers", opt.callers, caller_names, "all,none") ||
	    !check_list("--mem", opt.mem, (const char *const[]){ "host", "device", "auto", NULL }, NULL))
		return 2;
	if (opt.legs && !check_legs(opt.legs, ds_names))
		return 2;
	if (strchr(opt.mem, ',')) {
		fprintf(stderr, "opends-bench: --mem takes one of host, device, auto\n");
		return 2;
	}
	if (kvikio_script && access(kvikio_script, R_OK)) {
		fprintf(stderr, "opends-bench: --kvikio %s: %s\n", kvikio_script, strerror(errno));
		return 2;
	}

	char why[160] = "";
	opt.use_gpu = strcmp(opt.mem, "host") && gpu_open(why, sizeof(why));
	if (!strcmp(opt.mem, "device") && !opt.use_gpu) {
		fprintf(stderr, "opends-bench: --mem device: no GPU (%s)\n", why);
		return 2;
	}
	if (out_open(opt.out, opt.append))
		return 1;
	write_machine(opt.use_gpu ? gpu_name() : "none");
	printf("opends-bench %s: destination %s memory%s%s; data in %s; results in %s/records.csv\n", opt.commit,
	       opt.use_gpu ? "GPU" : "host", opt.use_gpu ? " on " : "", opt.use_gpu ? gpu_name() : "", opt.data,
	       opt.out);
	if (!opt.gen_only)
		printf("%-12s %-8s %-15s %-4s %16s %-18s %s\n", "dataset", "mode", "backend", "cache", "figure",
		       "ratio to ceiling", "what was measured");
	fflush(stdout);
	progress_init();

	if (opt.baselines && !opt.gen_only)
		record_h2d_ceiling();
	/* KvikIO's same legs first (their files generated for it): a leg of
	 * ours that hangs ends this command (exit 3), and the peer's rows must
	 * not go with it */
	bool gen_only = opt.gen_only;
	for (unsigned pass = kvikio_script && !gen_only ? 0 : 1; pass < 2; pass++) {
		opt.gen_only = gen_only || pass == 0;
		for (unsigned i = 0; i < ds_nspecs; i++)
			if (in_list(opt.datasets, ds_specs[i].name))
				run_dataset(&ds_specs[i]);
		if (opt.source && !opt.gen_only)
			run_source(); /* the caller legs on the URL, in place of the file */
		else if (!opt.source && strcmp(opt.callers, "none"))
			run_callers();
		if (pass == 0) {
			out_close(); /* the script appends to records.csv */
			run_kvikio();
			if (out_open(opt.out, true))
				return 1;
		}
	}
	opt.gen_only = gen_only;
	progress_end();
	out_close();
	cufile_close();
	if (opt.use_gpu)
		gpu_close();
	if (opt.quick)
		printf("The data stays in %s for the next run (delete it when done). bench/report %s writes the "
		       "report.\n",
		       opt.data, opt.out);
	if (bench_failures)
		fprintf(stderr, "opends-bench: %d leg(s) failed\n", bench_failures);
	return bench_failures ? 1 : 0;
}
