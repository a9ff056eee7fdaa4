/* Partition math: world sizes 1-8 and awkward element counts. */
#include "zero/partition.h"
#include "zt.h"

int main(void) {
    zt_name = "partition";
    const int64_t sizes[] = {1, 7, 8, 9, 63, 64, 65, 127, 1000, 4097, 1000003, 123456789};
    for (int w = 1; w <= 8; w++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            int64_t n = sizes[k];
            for (int r = 0; r < w; r++) {
                zpartition p;
                zpart_init(&p, n, w, r);
                ZT_CHECK(p.shard % ZPART_SHARD_ALIGN == 0, "w %d n %lld: shard %lld not aligned", w, (long long)n,
                         (long long)p.shard);
                ZT_CHECK(p.padded == p.shard * w && p.padded >= n, "w %d n %lld: padded %lld", w, (long long)n,
                         (long long)p.padded);
                ZT_CHECK(p.padded - n < (int64_t)w * ZPART_SHARD_ALIGN + ZPART_PARAM_ALIGN,
                         "w %d n %lld: padding %lld too large", w, (long long)n, (long long)(p.padded - n));
                /* Ranges split into per-rank pieces that tile the range and stay inside each shard. */
                int64_t ranges[][2] = {{0, n}, {n / 3, n / 2}, {0, p.padded}, {p.shard - 1, p.shard + 1}, {5, 5}};
                for (int q = 0; q < 5; q++) {
                    int64_t a = ranges[q][0], b = ranges[q][1];
                    if (b > p.padded) b = p.padded;
                    if (a > b) a = b;
                    size_t counts[8], displs[8];
                    size_t mine = zpart_range_split(&p, a, b, counts, displs);
                    size_t total = 0, next = 0;
                    int ok = 1;
                    for (int rr = 0; rr < w; rr++) {
                        total += counts[rr];
                        if (counts[rr]) {
                            ok &= displs[rr] == next;
                            int64_t lo = a + (int64_t)displs[rr];
                            ok &= lo >= (int64_t)rr * p.shard && lo + (int64_t)counts[rr] <= (int64_t)(rr + 1) * p.shard;
                            next += counts[rr];
                        }
                    }
                    ZT_CHECK(ok && total == (size_t)(b - a) && mine == counts[r],
                             "w %d r %d range [%lld,%lld): pieces do not tile it", w, r, (long long)a, (long long)b);
                }
            }
        }
    return zt_finish();
}
