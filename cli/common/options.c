/* The option tables' parser and help printer (options.h). */
#include "cli/common/options.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int zcli_usage_error(const zcli_cmd *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", c->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* A whole number: plain digits, or a decimal/exponent form that is whole (1e6). */
static int parse_int(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*v && !*end && !errno) {
        if (x < lo || x > hi) return -1;
        *out = x;
        return 0;
    }
    double d = strtod(v, &end);
    if (!*v || *end || !(d >= (double)lo && d <= (double)hi) || d != floor(d) || fabs(d) >= 9.2e18) return -1;
    *out = (int64_t)d;
    return 0;
}

/* "80GB" (1e9), "80GiB" (2^30), "80G" (= GiB), plain bytes; K/M/G/T. */
static int parse_size(const char *v, uint64_t *out) {
    char *end = NULL;
    double x = strtod(v, &end), mul = 1;
    if (end && *end) {
        char u = (char)toupper((unsigned char)*end);
        const char *r = end + 1;
        int pw = u == 'K' ? 1 : u == 'M' ? 2 : u == 'G' ? 3 : u == 'T' ? 4 : u == 'B' ? 0 : -1;
        bool dec = !strcasecmp(r, "B") && u != 'B';
        if (pw < 0 || (u == 'B' && *r) || (!dec && *r && strcasecmp(r, "iB") && strcasecmp(r, "i"))) return -1;
        mul = pow(dec ? 1000.0 : 1024.0, pw);
    }
    if (!*v || !(x > 0) || x * mul > 1.8e19) return -1;
    *out = (uint64_t)(x * mul);
    return 0;
}

/* The index of v in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *v) {
    int i = 0;
    for (const char *p = choices;; i++) {
        size_t n = strcspn(p, "|");
        if (strlen(v) == n && !strncmp(p, v, n)) return i;
        if (!p[n]) return -1;
        p += n + 1;
    }
}

/* "a, b or c" from "a|b|c". */
static void choice_words(const char *choices, char *buf, size_t cap) {
    size_t k = 0, nbar = 0;
    for (const char *p = choices; *p; p++) nbar += *p == '|';
    for (const char *p = choices; *p && k + 8 < cap; p++) {
        if (*p != '|') {
            buf[k++] = *p;
            continue;
        }
        const char *sep = --nbar == 0 ? " or " : ", ";
        k += (size_t)snprintf(buf + k, cap - k, "%s", sep);
    }
    buf[k < cap ? k : cap - 1] = 0;
}

static int set_value(const zcli_cmd *c, const zcli_opt *o, void *dst, const char *v) {
    char *at = (char *)dst + o->off;
    char words[256];
    switch (o->type) {
    case ZCLI_FLAG: *(bool *)at = true; return 0;
    case ZCLI_INT:
        if (parse_int(v, o->lo, o->hi, (int64_t *)at) == 0) return 0;
        return zcli_usage_error(c, "%s needs an integer in %" PRId64 "..%" PRId64 ", got \"%s\"", o->name, o->lo, o->hi,
                                v);
    case ZCLI_TEXT:
        if (*v) return *(const char **)at = v, 0;
        return zcli_usage_error(c, "%s needs a value (%s), got an empty one", o->name, o->arg);
    case ZCLI_CHOICE:
        if ((*(int *)at = choice_index(o->choices, v)) >= 0) return 0;
        choice_words(o->choices, words, sizeof words);
        return zcli_usage_error(c, "%s must be %s, got \"%s\"", o->name, words, v);
    case ZCLI_SIZE:
        if (parse_size(v, (uint64_t *)at) == 0) return 0;
        return zcli_usage_error(c, "%s needs a size such as 80GB (1e9 bytes), 80GiB or 80G (2^30), got \"%s\"", o->name,
                                v);
    case ZCLI_LIST: {
        zcli_list *l = (zcli_list *)at;
        if (l->n == ZCLI_MAX_SETS) return zcli_usage_error(c, "%s: at most %d of them", o->name, ZCLI_MAX_SETS);
        l->v[l->n++] = v;
        return 0;
    }
    }
    return 2;
}

static const zcli_opt *find(const zcli_cmd *c, const char *name, void **dst) {
    for (int t = 0; t < ZCLI_MAX_TABLES && c->tables[t]; t++)
        for (const zcli_opt *o = c->tables[t]->opts; o->name; o++)
            if (!strcmp(o->name, name)) return *dst = c->dst[t], o;
    return NULL;
}

static int missing_value(const zcli_cmd *c, const zcli_opt *o, const char *next) {
    if (o->type == ZCLI_LIST)
        return zcli_usage_error(c, "%s needs %s, for example --set train_micro_batch_size_per_gpu=4", o->name, o->arg);
    if (next)
        return zcli_usage_error(c, "%s needs a value (%s), got the option \"%s\" (see %s --help)", o->name, o->arg,
                                next, c->name);
    return zcli_usage_error(c, "%s needs a value (%s) (see %s --help)", o->name, o->arg, c->name);
}

/* One pass over the arguments, storing into dst[] and *pos: 0, 1 at --help (printing nothing), or 2 after
 * printing what is wrong. */
static int parse_pass(const zcli_cmd *c, void *const *dsts, const char **pos, int first, int argc, char **argv) {
    zcli_cmd pc = *c;
    memcpy(pc.dst, dsts, sizeof pc.dst);
    pc.pos_dst = pos;
    c = &pc;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        void *dst = NULL;
        bool own = find(c, a, &dst) != NULL;
        if (c->keep_unknown && !own) {
            if (a[0] == '-' && next && next[0] != '-') i++; /* its value */
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (a[0] != '-' || !a[1]) {
            if (!c->positional) return zcli_usage_error(c, "unexpected argument \"%s\" (see %s --help)", a, c->name);
            if (*c->pos_dst) return zcli_usage_error(c, "one %s, got \"%s\" too", c->positional, a);
            *c->pos_dst = a;
            continue;
        }
        const zcli_opt *o = find(c, a, &dst);
        if (!o) return zcli_usage_error(c, "unknown option \"%s\" (see %s --help)", a, c->name);
        if (o->type == ZCLI_FLAG) {
            set_value(c, o, dst, NULL);
            continue;
        }
        /* A value is never the next option: `--save --quiet` lacks its value. */
        if (!next || (next[0] == '-' && next[1] == '-')) return missing_value(c, o, next);
        if (set_value(c, o, dst, next)) return 2;
        i++;
    }
    return 0;
}

/* Bytes that hold every field a table's options write. */
static size_t table_span(const zcli_table *t) {
    size_t n = 0;
    for (const zcli_opt *o = t->opts; o->name; o++)
        if (o->off + sizeof(zcli_list) > n) n = o->off + sizeof(zcli_list);
    return n;
}

int zcli_parse(const zcli_cmd *c, int first, int argc, char **argv) {
    /* A first pass into scratch fields checks the arguments and finds --help, so the command's fields still
     * hold their defaults when --help prints them (`zinc train --model gpt2 --help`); the second stores. */
    void *scratch[ZCLI_MAX_TABLES] = {0};
    const char *pos = NULL;
    bool ok = true;
    for (int t = 0; t < ZCLI_MAX_TABLES && c->tables[t]; t++)
        ok = ok && (scratch[t] = calloc(1, table_span(c->tables[t])));
    int r = ok ? parse_pass(c, scratch, &pos, first, argc, argv) : 0;
    for (int t = 0; t < ZCLI_MAX_TABLES; t++) free(scratch[t]);
    if (r == 1) zcli_help(c, stdout);
    if (r) return r;
    r = parse_pass(c, c->dst, c->pos_dst, first, argc, argv);
    if (r == 1) zcli_help(c, stdout);
    return r;
}

const char *zcli_peek(int first, int argc, char **argv, const char *name) {
    for (int i = first; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return NULL;
}

/* A range's upper end in --help: exact up to 2^32, beyond that as a power of two (2^53, 2^62-1). */
static void bound_text(int64_t hi, char *buf, size_t cap) {
    int k = 0;
    while (k < 62 && ((int64_t)1 << (k + 1)) <= hi) k++;
    if (hi <= ((int64_t)1 << 32) || (hi != ((int64_t)1 << k) && hi != ((int64_t)1 << (k + 1)) - 1))
        snprintf(buf, cap, "%" PRId64, hi);
    else
        snprintf(buf, cap, "2^%d%s", hi == ((int64_t)1 << k) ? k : k + 1, hi == ((int64_t)1 << k) ? "" : "-1");
}

/* The k-th word of "a|b|c". */
static void choice_at(const char *choices, int k, char *buf, size_t cap) {
    const char *p = choices;
    for (int i = 0; i < k && p; i++) p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL;
    snprintf(buf, cap, "%.*s", p ? (int)strcspn(p, "|") : 0, p ? p : "");
}

/* The default --help shows for o (options.h): its table's `later` text, else the value its field holds
 * after the command's defaults when that is a value the option takes; "" when it has none. */
static void default_text(const zcli_table *t, const zcli_opt *o, const void *dst, char *buf, size_t cap) {
    buf[0] = 0;
    for (const zcli_later *l = t->later; l && l->name; l++)
        if (!strcmp(l->name, o->name)) {
            snprintf(buf, cap, "%s%s", isdigit((unsigned char)l->text[0]) ? "" : ": ", l->text);
            return;
        }
    const char *at = dst ? (const char *)dst + o->off : NULL;
    if (!at) return;
    if (o->type == ZCLI_INT && *(const int64_t *)at >= o->lo && *(const int64_t *)at <= o->hi)
        snprintf(buf, cap, "%" PRId64, *(const int64_t *)at);
    else if (o->type == ZCLI_CHOICE && *(const int *)at >= 0)
        choice_at(o->choices, *(const int *)at, buf, cap);
    else if (o->type == ZCLI_TEXT && *(const char *const *)at)
        snprintf(buf, cap, "\"%s\"", *(const char *const *)at);
}

/* The help of one option: "  --name ARG", its text, its default and its range or choices. */
static void help_option(const zcli_table *t, const zcli_opt *o, const void *dst, FILE *f) {
    char head[64], tail[512] = "", hi[32], def[400];
    snprintf(head, sizeof head, "  %s%s%s", o->name, o->type == ZCLI_FLAG ? "" : " ",
             o->type == ZCLI_FLAG ? "" : o->arg);
    default_text(t, o, dst, def, sizeof def);
    size_t k = *def ? (size_t)snprintf(tail, sizeof tail, " (default%s%s)", def[0] == ':' ? "" : " ", def) : 0;
    if (o->type == ZCLI_INT && o->hi == INT64_MAX)
        snprintf(tail + k, sizeof tail - k, " [%" PRId64 "..]", o->lo);
    else if (o->type == ZCLI_INT)
        bound_text(o->hi, hi, sizeof hi), snprintf(tail + k, sizeof tail - k, " [%" PRId64 "..%s]", o->lo, hi);
    else if (o->type == ZCLI_CHOICE)
        snprintf(tail + k, sizeof tail - k, " [%s]", o->choices);
    fprintf(f, "%-22s", head);
    if (strlen(head) >= 22) fprintf(f, "\n%22s", "");
    for (const char *p = o->help;;) {
        size_t n = strcspn(p, "\n");
        /* a default that would make the last line longer than 100 columns goes on a line of its own */
        bool wrap = !p[n] && k && 22 + n + strlen(tail) > 100;
        fprintf(f, "%.*s%s%s\n", (int)n, p, wrap ? "\n                      " : "", p[n] ? "" : tail + wrap);
        if (!p[n]) break;
        p += n + 1;
        fprintf(f, "%22s", "");
    }
}

void zcli_help(const zcli_cmd *c, FILE *f) {
    fprintf(f, "%s\n", c->usage);
    if (c->about) fprintf(f, "\n%s\n", c->about);
    for (int t = 0; t < ZCLI_MAX_TABLES && c->tables[t]; t++) {
        fprintf(f, "\n%s\n", c->tables[t]->title);
        for (const zcli_opt *o = c->tables[t]->opts; o->name; o++) help_option(c->tables[t], o, c->dst[t], f);
    }
    fprintf(f, "\n%-22sthis text\n", "  --help, -h");
    if (c->footer) fprintf(f, "\n%s\n", c->footer);
}

int zcli_choice(const char *choices, const char *v) { return choice_index(choices, v); }

int zcli_subcommand(const zcli_subs *s, int argc, char **argv, int *rc) {
    int k = argc < 2 ? -1 : choice_index(s->words, argv[1]);
    if (k >= 0) return k;
    bool help = argc >= 2 && (choice_index("--help|-h", argv[1]) >= 0);
    if (argc >= 2 && !help && s->noun) {
        char words[256];
        choice_words(s->words, words, sizeof words);
        if (s->list)
            fprintf(stderr, "%s: unknown %s \"%s\" (%s)\n", s->name, s->noun, argv[1], words);
        else
            fprintf(stderr, "%s: unknown %s \"%s\"\n\n", s->name, s->noun, argv[1]);
    }
    s->usage(help ? stdout : stderr);
    *rc = help ? 0 : 2;
    return -1;
}
