/* Sediment demo: the driver of the built-in example program (see unit.h and docs/demo.md).
 *
 * Usage: demo [ITERATIONS]   (default 10000). Start-up runs some of every unit's cold code
 * once; then the hot chain u0_hot_a -> ... -> u39_hot_a runs ITERATIONS times. The output is
 * one line with a checksum that depends only on ITERATIONS, so every relinked binary must
 * print the same line.
 */
#include <stdio.h>
#include <stdlib.h>

#define UNITS(X)                                                                               \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16)   \
  X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)     \
  X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39)

#define DECLARE(k) unsigned u##k##_touch(unsigned);
UNITS(DECLARE)
unsigned u0_hot_a(unsigned);

int main(int argc, char **argv) {
  long iterations = 10000;
  if (argc > 1) {
    char *end;
    iterations = strtol(argv[1], &end, 10);
    if (*end != '\0' || iterations < 0 || iterations > 100000000) {
      fprintf(stderr, "demo: ITERATIONS must be an integer in 0..100000000\n");
      return 2;
    }
  }
  unsigned acc = 1;
#define TOUCH(k) acc = u##k##_touch(acc);
  UNITS(TOUCH)
  for (long i = 0; i < iterations; i++)
    acc = u0_hot_a(acc + (unsigned)i);
  printf("sediment demo: %ld iterations, checksum %08x\n", iterations, acc);
  return 0;
}
