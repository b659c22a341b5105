/*
 * test_sync_read_prep <dir>
 *
 * Writes the sync-read data files into <dir> (created if missing):
 *   pat16.bin  64 pages (256 KiB) of the upstream's 16-page pattern pat16()
 *   hash.bin   1 MiB + 1234 bytes of hashpat(): not a multiple of 4096, so
 *              the last block is partial and reads cross EOF.
 * test_sync_read <dir> reads them back through a backend. It does not use
 * the library at all: the files must be right whatever the library does.
 *
 * After writing it reads both files back with plain pread and checks them
 * against the pattern functions, so running it as a test checks its own
 * output.
 */
#include "common.h"

static void check_file(const char *path, size_t size, t_patfn fn)
{
	int fd = open(path, O_RDONLY);
	CHECKF(fd >= 0, "open(%s): %s", path, strerror(errno));
	uint8_t *exp = t_oracle(size, fn);
	t_check_file_fd(fd, exp, size, path);
	free(exp);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s <dir>\n", argv[0]);
		return 1;
	}
	const char *dir = argv[1];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		FAILF("mkdir(%s): %s", dir, strerror(errno));

	char p16[PATH_MAX], ph[PATH_MAX];
	snprintf(p16, sizeof p16, "%s/%s", dir, T_PAT16_NAME);
	snprintf(ph, sizeof ph, "%s/%s", dir, T_HASH_NAME);

	t_write_pattern_file(p16, T_PAT16_SIZE, pat16);
	t_write_pattern_file(ph, T_HASH_SIZE, hashpat);

	check_file(p16, T_PAT16_SIZE, pat16);
	check_file(ph, T_HASH_SIZE, hashpat);

	/* The pattern functions themselves: pat16 is the upstream formula;
	 * hashpat must differ between neighbouring sectors at equal in-sector
	 * offsets (else a wrong-sector read could pass). */
	CHECK(pat16(0) == 0 && pat16(4095) == 255 && pat16(4096) == 1 && pat16(4097) == 2);
	CHECK(pat16(16 * 4096 + 10) == 26);
	unsigned same = 0;
	for (uint64_t s = 0; s < 64; s++)
		for (uint64_t i = 0; i < 512; i += 8) {
			uint64_t a = s * 512 + i, b = (s + 1) * 512 + i;
			uint64_t wa = 0, wb = 0;
			for (int k = 0; k < 8; k++) {
				wa |= (uint64_t)hashpat(a + k) << (8 * k);
				wb |= (uint64_t)hashpat(b + k) << (8 * k);
			}
			same += wa == wb;
		}
	CHECKF(same == 0, "hashpat repeats 8-byte words across sectors (%u times)", same);

	printf("wrote %s (%d bytes) and %s (%zu bytes)\n", p16, T_PAT16_SIZE, ph, T_HASH_SIZE);
	return 0;
}
