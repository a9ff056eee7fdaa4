/* TensorBoard event files. The records are protobuf messages (tb_event.proto, encoded by protobuf-c) in
 * TFRecord framing: a little-endian uint64 length, the masked CRC-32C of those 8 bytes, the data, the masked
 * CRC-32C of the data (tensorflow/core/lib/io/record_writer.cc; TensorBoard's reader checks both). The file
 * is named as torch's SummaryWriter names it, so TensorBoard and tools that look for "tfevents" find it. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/core/crc32c.h"
#include "base/core/error.h"
#include "runtime/monitor/monitor_internal.h"
#include "runtime/monitor/tb_event.pb-c.h"

#define TB_MAX_RECORD 1024 /* an Event with one scalar and a tag of at most 127 bytes is far below this */

static uint32_t masked_crc(const void *p, size_t n) {
    uint32_t c = zcrc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

void zmon_tfrecord_frame(const void *data, size_t n, unsigned char *out) {
    put_le(out, n, 8);
    put_le(out + 8, masked_crc(out, 8), 4);
    memcpy(out + 12, data, n);
    put_le(out + 12 + n, masked_crc(data, n), 4);
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* the event's timestamp, not a duration: the epoch clock */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* log NULL: no warning on failure (the caller makes it an error). */
static void write_event(zmon_tb *t, const ZmonTb__Event *ev, const zlog *log) {
    unsigned char data[TB_MAX_RECORD], rec[TB_MAX_RECORD + 16];
    size_t n = zmon_tb__event__get_packed_size(ev);
    if (n > sizeof data) {
        if (log) ZLOG_WARN(log, "tensorboard: an event of %zu bytes is too large; skipped", n);
        return;
    }
    zmon_tb__event__pack(ev, data);
    zmon_tfrecord_frame(data, n, rec);
    zmon_file_write(&t->file, rec, n + 16, log, "tensorboard");
}

void zmon_tb_scalar(zmon_tb *t, const char *tag, double value, int64_t samples, const zlog *log) {
    ZmonTb__Summary__Value v = ZMON_TB__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = ZMON_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value; /* what SummaryWriter.add_scalar stores */
    ZmonTb__Summary__Value *values[1] = {&v};
    ZmonTb__Summary s = ZMON_TB__SUMMARY__INIT;
    s.n_value = 1;
    s.value = values;
    ZmonTb__Event ev = ZMON_TB__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.step = samples;
    ev.what_case = ZMON_TB__EVENT__WHAT_SUMMARY;
    ev.summary = &s;
    write_event(t, &ev, log);
}

/* events.out.tfevents.<seconds, 10 digits>.<host>.<pid>.<n>, n counting the files of this process. */
static void file_name(char *name, size_t cap) {
    static atomic_int made;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    snprintf(name, cap, "events.out.tfevents.%010lld.%s.%ld.%d", (long long)time(NULL), host, (long)getpid(),
             atomic_fetch_add(&made, 1));
}

zinc_status zmon_tb_open(zmon_tb *t, const zcfg_monitor *m, const zlog *log) {
    char name[512];
    t->dir.block = "tensorboard";
    t->file.fd = -1;
    zinc_status st = zmon_dir_open(&t->dir, m);
    if (st != ZINC_OK) return st;
    file_name(name, sizeof name);
    st = zmon_file_create(&t->dir, name, &t->file);
    if (st != ZINC_OK) return st;
    /* the first record names the format, as every TensorFlow and torch writer starts */
    ZmonTb__Event ev = ZMON_TB__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.what_case = ZMON_TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    write_event(t, &ev, NULL);
    if (t->file.failed)
        return ZERR(ZINC_ERR_IO, "tensorboard: cannot write %s: %s", t->file.path, strerror(t->file.err));
    ZLOG_INFO(log, "tensorboard: writing %s", t->file.path);
    return ZINC_OK;
}
