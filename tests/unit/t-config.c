/*
 * t-config.c - what users type: the strict parsers (src/parse.c), the config
 * table (src/config.c: defaults, setting by name, environment, flags,
 * validation, --help and --print-config); the static peer list is
 * t-peers'. Every error must be RING_ERR_INVALID with a message that
 * names what was wrong and where it came from.
 */
#include "ring_build.h" /* _GNU_SOURCE for setenv, open_memstream */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/comm.h>
#include <ringd/config.h>
#include <ringd/status.h>

#include "parse.h"
#include "tap.h"

/* Every variable of the config table, in table order. */
static const char *const table_env[] = {
    "RING_RANK",       "RING_WORLD_SIZE",      "RING_PEERS",   "RING_TRANSPORT",
    "RING_CHUNK_SIZE", "RING_CHANNELS",        "RING_TCP_STREAMS", "RING_TCP_SOCKBUF",
    "RING_TIMEOUT",    "RING_CONNECT_TIMEOUT", "RING_SPIN_US", "RING_PORT",
    "RING_BIND",       "RING_JOB_ID",          "RING_LOG_LEVEL",
};
static const char *const table_flags[] = {
    "--rank",    "--world-size", "--peers",      "--transport", "--chunk-size",
    "--channels", "--tcp-streams", "--tcp-sockbuf", "--timeout",   "--connect-timeout",
    "--spin-us", "--port",       "--bind",       "--job-id",    "--log-level",
};
#define NTABLE (sizeof(table_env) / sizeof(table_env[0]))

/* What ring_config_print(cfg) (or ring_config_print_help when cfg is NULL) writes, malloc'ed. */
static char *capture_print(const ring_config_t *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        bail("open_memstream failed");
    if (cfg != NULL)
        ring_config_print(cfg, out);
    else
        ring_config_print_help(out);
    fclose(out);
    return text;
}

/* The line of text that starts with name followed by a space ("" when none). */
static const char *line_of(const char *text, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);

    buf[0] = '\0';
    for (const char *p = text; p != NULL && *p != '\0';) {
        const char *end = strchr(p, '\n');
        size_t l = end != NULL ? (size_t)(end - p) : strlen(p);

        if (l > n && strncmp(p, name, n) == 0 && p[n] == ' ') {
            snprintf(buf, len, "%.*s", (int)l, p);
            break;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return buf;
}

/* ---- parsers -------------------------------------------------------------------- */

static void test_parse_size(void)
{
    static const struct {
        const char *text;
        size_t want;
    } good[] = {
        {"0", 0}, {"1", 1}, {"4096", 4096}, {"64K", 65536}, {"64k", 65536},
        {"1M", 1048576}, {"2m", 2097152}, {"1.5G", 1610612736}, {"1G", 1073741824},
        {"0.5K", 512}, {"1MiB", 1048576}, {"1MB", 1048576}, {"4KiB", 4096}, {"256M", 268435456},
    };
    static const char *const bad[] = {
        "-1", "12Q", "", "1M5", "abc", "M", "1.3", "1.0000001K", "1 M", "1MM", "1Mx", "nan",
        "inf", "1e400", "-0", "99999999999999999999999G",
    };
    int failed = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 12345;
        if (ring_parse_size(good[i].text, &v) != 0 || v != good[i].want) {
            diag("ring_parse_size(\"%s\") gave %zu, want %zu", good[i].text, v, good[i].want);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_size accepts 0, 4096, 64K, 1M, 1.5G, 0.5K, 1MiB, 1MB ...");
    failed = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 12345;
        if (ring_parse_size(bad[i], &v) != -1 || v != 12345) {
            diag("ring_parse_size(\"%s\") accepted it (%zu) or touched the value", bad[i], v);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_size rejects -1, 12Q, \"\", 1M5, abc, 1.3, nan, inf, overflow ...");
    {
        size_t v = 7;
        ok(ring_parse_size(NULL, &v) == -1 && v == 7, "ring_parse_size(NULL) is an error");
    }
    {
        size_t v = 0;
        is_int(ring_parse_size("1M", &v) == 0 ? (long long)v : -1, 1048576, "\"1M\" is 1048576");
    }
}

static void test_parse_duration(void)
{
    static const struct {
        const char *text;
        double want;
    } good[] = {
        {"30", 30}, {"30s", 30}, {"500ms", 0.5}, {"2m", 120}, {"2min", 120}, {"1h", 3600},
        {"1.5s", 1.5}, {"250us", 0.00025}, {"0", 0}, {"0.25", 0.25},
    };
    static const char *const bad[] = {"abc", "-5", "", "30x", "5 s", "ms", "nan", "inf",
                                      "1e999", "-0.5s", "2mm", "30S"};
    int failed = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        double v = -1;
        if (ring_parse_duration(good[i].text, &v) != 0 || v < good[i].want * (1 - 1e-12) ||
            v > good[i].want * (1 + 1e-12)) {
            diag("ring_parse_duration(\"%s\") gave %g, want %g", good[i].text, v, good[i].want);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_duration accepts 30, 30s, 500ms, 2m, 2min, 1h, 1.5s, 250us, 0");
    failed = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double v = 42;
        if (ring_parse_duration(bad[i], &v) != -1 || v != 42) {
            diag("ring_parse_duration(\"%s\") accepted it (%g)", bad[i], v);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_duration rejects abc, -5, \"\", 30x, \"5 s\", nan, inf ...");
}

static void test_parse_long(void)
{
    static const struct {
        const char *text;
        long want;
    } good[] = {{"0", 0}, {"42", 42}, {"-7", -7}, {"2147483647", 2147483647L}};
    static const char *const bad[] = {"", "12a", "abc", "1.0", "99999999999999999999", "0x10",
                                      "1 "};
    int failed = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        long v = 99;
        if (ring_parse_long(good[i].text, &v) != 0 || v != good[i].want) {
            diag("ring_parse_long(\"%s\") gave %ld", good[i].text, v);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_long accepts 0, 42, -7, 2147483647");
    failed = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long v = 99;
        if (ring_parse_long(bad[i], &v) != -1 || v != 99) {
            diag("ring_parse_long(\"%s\") accepted it (%ld)", bad[i], v);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_long rejects \"\", 12a, abc, 1.0, overflow, 0x10, trailing space");
}

static void test_parse_ports(void)
{
    static const struct {
        const char *text;
        int lo, hi;
    } good[] = {{"29500", 29500, 29500}, {"29500-29599", 29500, 29599}, {"1", 1, 1},
                {"65535", 65535, 65535}, {"1-65535", 1, 65535}, {"7-7", 7, 7}};
    static const char *const bad[] = {"0", "65536", "100-50", "abc", "29500-", "-5", "",
                                      "1-2-3", "29500-70000", "0-10", "29500x",
                                      "123456789012345678901234567890123456789"};
    int failed = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        int lo = -1, hi = -1;
        if (ring_parse_port_range(good[i].text, &lo, &hi) != 0 || lo != good[i].lo ||
            hi != good[i].hi) {
            diag("ring_parse_port_range(\"%s\") gave %d-%d", good[i].text, lo, hi);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_port_range accepts 29500, 29500-29599, 1, 65535, 1-65535, 7-7");
    failed = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int lo = -1, hi = -1;
        if (ring_parse_port_range(bad[i], &lo, &hi) != -1 || lo != -1 || hi != -1) {
            diag("ring_parse_port_range(\"%s\") accepted it (%d-%d)", bad[i], lo, hi);
            failed = 1;
        }
    }
    ok(!failed, "ring_parse_port_range rejects 0, 65536, 100-50, abc, 29500-, -5, 1-2-3, ...");
}

static void test_format_size(void)
{
    static const struct {
        size_t v;
        const char *want;
    } cases[] = {{0, "0"},      {1, "1"},       {1536, "1536"}, {1024, "1K"}, {65536, "64K"},
                 {1048576, "1M"}, {1572864, "1536K"}, {1073741824, "1G"}, {(size_t)3 << 30, "3G"},
                 {1000, "1000"}};
    int failed = 0;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        size_t back = 0;

        ring_format_size(cases[i].v, buf, sizeof(buf));
        if (strcmp(buf, cases[i].want) != 0 || ring_parse_size(buf, &back) != 0 ||
            back != cases[i].v) {
            diag("ring_format_size(%zu) is '%s', want '%s'", cases[i].v, buf, cases[i].want);
            failed = 1;
        }
    }
    ok(!failed, "ring_format_size gives the shortest exact form, which parses back");
}

/* ---- the config table ------------------------------------------------------------ */

static void test_defaults(void)
{
    ring_config_t cfg;
    char *text, line[512];
    int all_default = 1;

    memset(&cfg, 0x5a, sizeof(cfg));
    ring_config_init(&cfg);
    ok(cfg.rank == -1 && cfg.world_size == 0, "defaults: rank -1 and world size 0 (not set)");
    ok(cfg.peers != NULL && strcmp(cfg.peers, "") == 0, "defaults: empty peer list");
    ok(cfg.transport == RING_CFG_TRANSPORT_AUTO && cfg.chunk_bytes == 262144 && cfg.channels == 1 &&
           cfg.tcp_streams == 1 && cfg.tcp_sockbuf == 0,
       "defaults: transport auto, chunk 256K, 1 channel, 1 stream, autotuned socket buffers");
    ok(cfg.timeout_s == 30 && cfg.connect_timeout_s == 120 && cfg.spin_us == 1000,
       "defaults: timeout 30 s, connect timeout 120 s, spin 1000 us");
    ok(cfg.port_lo == 29500 && cfg.port_hi == 29500 && strcmp(cfg.bind, "") == 0 &&
           strcmp(cfg.job_id, "0") == 0 && cfg.log_level == RING_CFG_LOG_NONE,
       "defaults: port 29500, bind \"\", job id \"0\", log level none");
    text = capture_print(&cfg);
    for (size_t i = 0; i < NTABLE; i++) {
        char want[64];
        snprintf(want, sizeof(want), "(default, %s)", table_env[i]);
        if (strstr(text, want) == NULL) {
            diag("ring_config_print has no '%s'", want);
            all_default = 0;
        }
    }
    ok(all_default, "ring_config_print: every setting comes from its default after init");
    like(line_of(text, "chunk-size", line, sizeof(line)), "256K", "ring_config_print shows "
         "chunk-size 256K");
    free(text);
    ring_config_free(&cfg);
    ok(cfg.peers == NULL, "ring_config_free releases the peer list");
    ring_config_free(NULL); /* must not crash */
}

static void test_set(void)
{
    ring_config_t cfg;
    ring_status_t st;

    ring_config_init(&cfg);
    st = ring_config_set(&cfg, "chunk-size", "2M", RING_SRC_API);
    ok(st == RING_OK && cfg.chunk_bytes == 2097152, "set chunk-size 2M by name");
    st = ring_config_set(&cfg, "--chunk-size", "64K", RING_SRC_FLAG);
    ok(st == RING_OK && cfg.chunk_bytes == 65536, "set --chunk-size 64K (leading dashes)");
    ok(ring_config_set(&cfg, "timeout", "500ms", RING_SRC_API) == RING_OK &&
           cfg.timeout_s == 0.5,
       "set timeout 500ms");
    ok(ring_config_set(&cfg, "port", "30000-30009", RING_SRC_API) == RING_OK &&
           cfg.port_lo == 30000 && cfg.port_hi == 30009,
       "set port 30000-30009");
    ok(ring_config_set(&cfg, "peers", "a:1,b:2", RING_SRC_API) == RING_OK &&
           strcmp(cfg.peers, "a:1,b:2") == 0 &&
           ring_config_set(&cfg, "peers", "c:3", RING_SRC_API) == RING_OK &&
           strcmp(cfg.peers, "c:3") == 0,
       "set peers twice (the old copy is replaced)");
    ok(ring_config_set(&cfg, "job-id", "exp-12", RING_SRC_API) == RING_OK &&
           strcmp(cfg.job_id, "exp-12") == 0 &&
           ring_config_set(&cfg, "transport", "tcp", RING_SRC_API) == RING_OK &&
           cfg.transport == RING_CFG_TRANSPORT_TCP &&
           ring_config_set(&cfg, "log-level", "debug", RING_SRC_API) == RING_OK &&
           cfg.log_level == RING_CFG_LOG_DEBUG &&
           ring_config_set(&cfg, "channels", "16", RING_SRC_API) == RING_OK && cfg.channels == 16,
       "set job-id, transport tcp, log-level debug, channels 16");

    /* invalid values: RING_ERR_INVALID, the message names flag and variable, nothing changes */
    st = ring_config_set(&cfg, "chunk-size", "lots", RING_SRC_FLAG);
    is_int(st, RING_ERR_INVALID, "set chunk-size lots is RING_ERR_INVALID");
    like(ring_last_error(), "--chunk-size", "the message names --chunk-size");
    like(ring_last_error(), "RING_CHUNK_SIZE", "the message names RING_CHUNK_SIZE");
    like(ring_last_error(), "'lots'", "the message quotes the bad value");
    is_int((long long)cfg.chunk_bytes, 65536, "a rejected value leaves the setting alone");
    {
        static const struct {
            const char *name, *value, *flag, *env;
        } bad[] = {
            {"channels", "0", "--channels", "RING_CHANNELS"},
            {"channels", "17", "--channels", "RING_CHANNELS"},
            {"channels", "two", "--channels", "RING_CHANNELS"},
            {"tcp-streams", "-1", "--tcp-streams", "RING_TCP_STREAMS"},
            {"rank", "abc", "--rank", "RING_RANK"},
            {"rank", "-2", "--rank", "RING_RANK"},
            {"world-size", "65537", "--world-size", "RING_WORLD_SIZE"},
            {"timeout", "-5", "--timeout", "RING_TIMEOUT"},
            {"connect-timeout", "soon", "--connect-timeout", "RING_CONNECT_TIMEOUT"},
            {"transport", "carrier-pigeon", "--transport", "RING_TRANSPORT"},
            {"log-level", "loud", "--log-level", "RING_LOG_LEVEL"},
            {"port", "0", "--port", "RING_PORT"},
            {"port", "30000-20000", "--port", "RING_PORT"},
            {"tcp-sockbuf", "1Q", "--tcp-sockbuf", "RING_TCP_SOCKBUF"},
            {"spin-us", "2000000", "--spin-us", "RING_SPIN_US"},
        };
        int failed = 0;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            st = ring_config_set(&cfg, bad[i].name, bad[i].value, RING_SRC_FLAG);
            if (st != RING_ERR_INVALID || strstr(ring_last_error(), bad[i].flag) == NULL ||
                strstr(ring_last_error(), bad[i].env) == NULL) {
                diag("set %s '%s': status %d, message '%s'", bad[i].name, bad[i].value, (int)st,
                     ring_last_error());
                failed = 1;
            }
        }
        ok(!failed, "15 out-of-range or malformed values: RING_ERR_INVALID naming flag and "
                    "variable");
    }
    {
        char long_id[RING_CONFIG_STR_MAX + 10];
        memset(long_id, 'j', sizeof(long_id) - 1);
        long_id[sizeof(long_id) - 1] = '\0';
        ok(ring_config_set(&cfg, "job-id", long_id, RING_SRC_API) == RING_ERR_INVALID &&
               strcmp(cfg.job_id, "exp-12") == 0,
           "a job id longer than the field is rejected, not truncated");
    }
    st = ring_config_set(&cfg, "chunksize", "1M", RING_SRC_FLAG);
    is_int(st, RING_ERR_UNSUPPORTED, "an unknown name is RING_ERR_UNSUPPORTED");
    like(ring_last_error(), "chunksize", "the message names the unknown setting");
    ok(ring_config_set(&cfg, "", "1", RING_SRC_FLAG) == RING_ERR_UNSUPPORTED &&
           ring_config_set(&cfg, "--", "1", RING_SRC_FLAG) == RING_ERR_UNSUPPORTED &&
           ring_config_set(&cfg, "RING_CHUNK_SIZE", "1M", RING_SRC_FLAG) == RING_ERR_UNSUPPORTED,
       "\"\", \"--\" and an environment variable name are not setting names");
    {
        ring_config_t copy;
        ok(ring_config_copy(&copy, &cfg) == RING_OK && copy.peers != cfg.peers &&
               strcmp(copy.peers, "c:3") == 0 && copy.chunk_bytes == cfg.chunk_bytes,
           "ring_config_copy duplicates the peer list");
        ring_config_free(&copy);
        ok(strcmp(cfg.peers, "c:3") == 0, "freeing the copy leaves the original intact");
    }
    ring_config_free(&cfg);
}

static void unset_table_env(void)
{
    for (size_t i = 0; i < NTABLE; i++)
        unsetenv(table_env[i]);
    unsetenv("RING_DEBUG");
}

static void test_env(void)
{
    ring_config_t cfg;
    ring_status_t st;
    char *text, line[512];
    int before;

    unset_table_env();
    setenv("RING_CHUNK_SIZE", "2M", 1);
    setenv("RING_TIMEOUT", "5s", 1);
    setenv("RING_PEERS", "h1:1,h2:2", 1);
    ring_config_init(&cfg);
    st = ring_config_load_env(&cfg);
    ok(st == RING_OK && cfg.chunk_bytes == 2097152 && cfg.timeout_s == 5 &&
           strcmp(cfg.peers, "h1:1,h2:2") == 0,
       "RING_CHUNK_SIZE=2M RING_TIMEOUT=5s RING_PEERS=... are read");
    ok(cfg.channels == 1 && cfg.connect_timeout_s == 120, "unset variables keep the defaults");
    /* a flag after the environment wins */
    ok(ring_config_set(&cfg, "--timeout", "7", RING_SRC_FLAG) == RING_OK && cfg.timeout_s == 7,
       "a flag set after the environment wins");
    text = capture_print(&cfg);
    like(line_of(text, "chunk-size", line, sizeof(line)), "(environment, RING_CHUNK_SIZE)",
         "ring_config_print: chunk-size from the environment");
    like(line, "2M", "ring_config_print shows chunk-size 2M");
    like(line_of(text, "timeout", line, sizeof(line)), "(flag, RING_TIMEOUT)",
         "ring_config_print: timeout from a flag");
    like(line, "7s", "ring_config_print shows timeout 7s");
    like(line_of(text, "channels", line, sizeof(line)), "(default, RING_CHANNELS)",
         "ring_config_print: channels from the default");
    free(text);
    ring_config_free(&cfg);

    setenv("RING_CHANNELS", "abc", 1);
    ring_config_init(&cfg);
    st = ring_config_load_env(&cfg);
    is_int(st, RING_ERR_INVALID, "RING_CHANNELS=abc is RING_ERR_INVALID");
    like(ring_last_error(), "RING_CHANNELS", "the message names RING_CHANNELS");
    like(ring_last_error(), "'abc'", "the message quotes the bad value");
    ring_config_free(&cfg);
    unsetenv("RING_CHANNELS");

    /* RING_DEBUG is a shorthand for RING_LOG_LEVEL=debug, which wins when set */
    setenv("RING_DEBUG", "1", 1);
    ring_config_init(&cfg);
    ok(ring_config_load_env(&cfg) == RING_OK && cfg.log_level == RING_CFG_LOG_DEBUG,
       "RING_DEBUG=1 means log level debug");
    ring_config_free(&cfg);
    setenv("RING_LOG_LEVEL", "warn", 1);
    ring_config_init(&cfg);
    ok(ring_config_load_env(&cfg) == RING_OK && cfg.log_level == RING_CFG_LOG_WARN,
       "RING_LOG_LEVEL=warn wins over RING_DEBUG=1");
    ring_config_free(&cfg);
    unsetenv("RING_LOG_LEVEL");
    setenv("RING_DEBUG", "0", 1);
    ring_config_init(&cfg);
    ok(ring_config_load_env(&cfg) == RING_OK && cfg.log_level == RING_CFG_LOG_NONE,
       "RING_DEBUG=0 leaves logging off");
    ring_config_free(&cfg);
    unset_table_env();

    /* unknown RING_* variables: counted (whatever the test environment already has) */
    before = ring_config_check_env(NULL);
    setenv("RING_FOO", "1", 1);
    is_int(ring_config_check_env(NULL), before + 1, "ring_config_check_env counts RING_FOO");
    {
        char *warn = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&warn, &len);

        ring_config_check_env(out);
        fclose(out);
        like(warn, "RING_FOO", "the warning names RING_FOO");
        free(warn);
    }
    setenv("RING_CHUNK_SIZE", "1M", 1);
    setenv("RING_DEBUG", "0", 1);
    setenv("RING_LOCAL_RANK", "0", 1);
    setenv("RINGTONE", "x", 1); /* not RING_ */
    is_int(ring_config_check_env(NULL), before + 1,
           "table variables, RING_DEBUG, RING_LOCAL_RANK and RINGTONE are not unknown");
    setenv("RING_CHUNK_SIZEX", "1M", 1); /* a prefix of a known name does not count */
    is_int(ring_config_check_env(NULL), before + 2, "RING_CHUNK_SIZEX is unknown");
    unsetenv("RING_FOO");
    unsetenv("RING_CHUNK_SIZEX");
    unsetenv("RING_LOCAL_RANK");
    unsetenv("RINGTONE");
    unset_table_env();
    is_int(ring_config_check_env(NULL), before, "back to the starting count");
}

static void test_parse_arg(void)
{
    ring_config_t cfg;
    char *argv[] = {"prog",     "--chunk-size", "2M",          "--foo",
                    "x",        "--chunk-size=4M", "-b",       "--timeout=2m",
                    "--rank",   "3",            "--",          "--chunk-size",
                    NULL};
    int argc = 12, i;
    ring_status_t st;

    ring_config_init(&cfg);
    i = 1;
    st = ring_config_parse_arg(&cfg, argc, argv, &i);
    ok(st == RING_OK && i == 3 && cfg.chunk_bytes == 2097152, "\"--chunk-size 2M\" uses two "
       "arguments");
    i = 3;
    st = ring_config_parse_arg(&cfg, argc, argv, &i);
    ok(st == RING_ERR_UNSUPPORTED && i == 3, "\"--foo\" is not ours: RING_ERR_UNSUPPORTED, index "
       "untouched");
    i = 5;
    st = ring_config_parse_arg(&cfg, argc, argv, &i);
    ok(st == RING_OK && i == 6 && cfg.chunk_bytes == 4194304, "\"--chunk-size=4M\" uses one "
       "argument");
    i = 6;
    st = ring_config_parse_arg(&cfg, argc, argv, &i);
    ok(st == RING_ERR_UNSUPPORTED && i == 6, "\"-b\" (short option) is not ours");
    i = 7;
    ok(ring_config_parse_arg(&cfg, argc, argv, &i) == RING_OK && i == 8 && cfg.timeout_s == 120,
       "\"--timeout=2m\"");
    i = 8;
    ok(ring_config_parse_arg(&cfg, argc, argv, &i) == RING_OK && i == 10 && cfg.rank == 3,
       "\"--rank 3\"");
    i = 10;
    ok(ring_config_parse_arg(&cfg, argc, argv, &i) == RING_ERR_UNSUPPORTED && i == 10,
       "\"--\" is not ours");
    i = 11;
    st = ring_config_parse_arg(&cfg, argc, argv, &i);
    ok(st == RING_ERR_INVALID && i == 11 && strstr(ring_last_error(), "--chunk-size") != NULL,
       "\"--chunk-size\" at the end without a value is an error naming it");
    {
        char *bad[] = {"prog", "--chunk-size", "lots", "--chunk-size=12Q", NULL};
        i = 1;
        st = ring_config_parse_arg(&cfg, 4, bad, &i);
        ok(st == RING_ERR_INVALID && strstr(ring_last_error(), "--chunk-size") != NULL &&
               strstr(ring_last_error(), "RING_CHUNK_SIZE") != NULL &&
               cfg.chunk_bytes == 4194304,
           "\"--chunk-size lots\" is RING_ERR_INVALID naming --chunk-size and RING_CHUNK_SIZE");
        i = 3;
        st = ring_config_parse_arg(&cfg, 4, bad, &i);
        ok(st == RING_ERR_INVALID && strstr(ring_last_error(), "'12Q'") != NULL,
           "\"--chunk-size=12Q\" is RING_ERR_INVALID quoting 12Q");
    }
    {
        char *text = capture_print(&cfg), line[512];
        like(line_of(text, "chunk-size", line, sizeof(line)), "(flag, RING_CHUNK_SIZE)",
             "ring_config_print: chunk-size from a flag");
        free(text);
    }
    ring_config_free(&cfg);
}

/* The on/off settings are switches, as the daemon's are (one engine, base/opt_table.c). */
static void test_switches(void)
{
    ring_config_t cfg;
    char *argv[] = {"prog", "--autotune", "--no-autotune", "--autotune", "off", "--autotune=yes",
                    "--no-codec", "--no-autotune=on", "--autotune", "--rank", NULL};
    int i;
    ring_status_t st;

    ring_config_init(&cfg);
    i = 1;
    ok(ring_config_parse_arg(&cfg, 10, argv, &i) == RING_OK && i == 2 &&
           cfg.autotune == 1,
       "\"--autotune\" alone is on (one argument)");
    ok(ring_config_parse_arg(&cfg, 10, argv, &i) == RING_OK && i == 3 &&
           cfg.autotune == 0,
       "\"--no-autotune\" is off");
    ok(ring_config_parse_arg(&cfg, 10, argv, &i) == RING_OK && i == 5 &&
           cfg.autotune == 0,
       "\"--autotune off\" still takes its value (two arguments)");
    ok(ring_config_parse_arg(&cfg, 10, argv, &i) == RING_OK && i == 6 &&
           cfg.autotune == 1,
       "\"--autotune=yes\": the usual spellings of on, stored as on");
    st = ring_config_parse_arg(&cfg, 10, argv, &i);
    ok(st == RING_ERR_UNSUPPORTED && i == 6, "\"--no-codec\": codec is no switch, not ours");
    i = 7;
    st = ring_config_parse_arg(&cfg, 10, argv, &i);
    ok(st == RING_ERR_INVALID && strstr(ring_last_error(), "--no-autotune takes no value"),
       "\"--no-autotune=on\" is an error that says so: %s", ring_last_error());
    i = 8;
    ok(ring_config_parse_arg(&cfg, 10, argv, &i) == RING_OK && i == 9 &&
           cfg.autotune == 1,
       "\"--autotune --rank\": the next flag is not taken as its value");
    {
        char *text = capture_print(NULL);
        like(text, "  --autotune, --no-autotune\n", "--help shows the switch forms");
        free(text);
    }
    ring_config_free(&cfg);
}

/* The choices are ints in the struct and words at the API: every word of every
 * choice set by name reads back as itself, and a log level's other spellings
 * read back as its word (docs/configuration.md). */
static void test_choice_words(void)
{
    static const char *const choices[][2] = {
        {"transport", "auto|tcp|shm|verbs"}, {"ring-order", "host|rank"}, {"autotune", "off|on"},
        {"codec", "none|fp16|bf16"}, {"lz4", "off|on|auto"}, {"progress-thread", "off|on"},
        {"hierarchical", "auto|on|off"}, {"algo", "auto|ring|rd|direct"}, {"rd-fit", "off|on|auto"},
        {"error-feedback", "off|on"}, {"fp16-scaling", "on|off"},
        {"auth", "connect|frames|encrypt"}, {"log-level", "none|error|warn|info|debug|trace"}};
    ring_config_t cfg;
    char got[32], word[32];
    int bad = 0, words = 0;

    ring_config_init(&cfg);
    for (size_t i = 0; i < sizeof(choices) / sizeof(choices[0]); i++)
        for (const char *p = choices[i][1]; *p != '\0'; p += *p == '|') {
            size_t n = strcspn(p, "|");

            snprintf(word, sizeof(word), "%.*s", (int)n, p);
            p += n;
            words++;
            if (ring_config_set(&cfg, choices[i][0], word, RING_SRC_API) != RING_OK ||
                ring_config_get(&cfg, choices[i][0], got, sizeof(got)) != RING_OK ||
                strcmp(got, word) != 0) {
                diag("%s %s read back as '%s'", choices[i][0], word, got);
                bad++;
            }
        }
    ok(bad == 0 && words == 39, "every word of the 13 choices (%d words) reads back as itself",
       words);
    ok(ring_config_set(&cfg, "log-level", "WARNING", RING_SRC_API) == RING_OK &&
           ring_config_get(&cfg, "log-level", got, sizeof(got)) == RING_OK &&
           strcmp(got, "warn") == 0 && cfg.log_level == RING_CFG_LOG_WARN &&
           ring_config_set(&cfg, "log-level", "3", RING_SRC_API) == RING_OK &&
           ring_config_get(&cfg, "log-level", got, sizeof(got)) == RING_OK &&
           strcmp(got, "info") == 0,
       "a log level typed WARNING reads back as warn, and 3 as info");
    ring_config_free(&cfg);
}

static void test_validate(void)
{
    ring_config_t cfg;

    ring_config_init(&cfg);
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "world size not set") != NULL &&
           strstr(ring_last_error(), "RING_WORLD_SIZE") != NULL,
       "no world size: RING_ERR_INVALID naming RING_WORLD_SIZE");
    cfg.world_size = 4;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "rank not set") != NULL &&
           strstr(ring_last_error(), "RING_RANK") != NULL,
       "no rank: RING_ERR_INVALID naming RING_RANK");
    cfg.rank = 4;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "rank 4 is out of range for world size 4") != NULL,
       "rank 4 of world size 4 is out of range");
    cfg.rank = 3;
    ring_config_set(&cfg, "peers", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4",
                    RING_SRC_API);
    is_int(ring_config_validate(&cfg), RING_OK, "rank 3 of world size 4 is fine");
    cfg.chunk_bytes = 32;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "RING_CHUNK_SIZE") != NULL,
       "a 32-byte chunk size is refused, naming RING_CHUNK_SIZE");
    cfg.chunk_bytes = ((size_t)1 << 30) + 1;
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID, "a chunk size over 1G is refused");
    cfg.chunk_bytes = 64;
    is_int(ring_config_validate(&cfg), RING_OK, "a 64-byte chunk size is fine");
    ok(ring_config_set(&cfg, "timeout", "0", RING_SRC_API) == RING_OK &&
           ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "--timeout") != NULL,
       "a zero timeout is refused, naming --timeout");
    ring_config_free(&cfg);

    /* regression: validate once ignored the peer list, so a wrong list only
     * failed later in ring_comm_open (and ring-bench exited 1, not 2) */
    ring_config_init(&cfg);
    cfg.world_size = 3;
    cfg.rank = 0;
    ring_config_set(&cfg, "peers", "127.0.0.1:1,127.0.0.1:2", RING_SRC_API);
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID,
           "ring_config_validate rejects 2 peers for world size 3");
    like(ring_last_error(), "2 entries but the world size is 3", "... and says so");
    ring_config_free(&cfg);

    /* the typed choices: a program can write any int into them, and the library
     * indexes tables by them (the transport's kind, the codec): out of range is
     * refused before anything uses it, naming the setting and its words */
    ring_config_init(&cfg);
    cfg.world_size = 1;
    cfg.rank = 0;
    is_int(ring_config_validate(&cfg), RING_OK, "a ring of one with the defaults is fine");
    cfg.codec = (ring_cfg_codec_t)7;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "--codec (RING_CODEC) holds 7") != NULL &&
           strstr(ring_last_error(), "none|fp16|bf16") != NULL,
       "cfg.codec = 7 is refused, naming --codec and its words");
    cfg.codec = RING_CFG_CODEC_BF16;
    cfg.transport = (ring_cfg_transport_t)-1;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "--transport (RING_TRANSPORT) holds -1") != NULL,
       "cfg.transport = -1 is refused");
    cfg.transport = RING_CFG_TRANSPORT_VERBS + 1;
    is_int(ring_config_validate(&cfg), RING_ERR_INVALID, "cfg.transport one past verbs is refused");
    cfg.transport = RING_CFG_TRANSPORT_SHM;
    cfg.fp16_scaling = 2;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "--fp16-scaling") != NULL,
       "an on/off setting holding 2 is refused");
    cfg.fp16_scaling = 0;
    cfg.log_level = (ring_cfg_log_t)6;
    ok(ring_config_validate(&cfg) == RING_ERR_INVALID &&
           strstr(ring_last_error(), "--log-level (RING_LOG_LEVEL) holds 6") != NULL,
       "cfg.log_level = 6 is refused");
    cfg.log_level = RING_CFG_LOG_TRACE;
    is_int(ring_config_validate(&cfg), RING_OK, "every choice at a valid value: fine again");
    {
        ring_comm_t *comm = NULL;

        cfg.algo = (ring_cfg_algo_t)4;
        ok(ring_comm_open(&cfg, &comm) == RING_ERR_INVALID && comm == NULL &&
               strstr(ring_last_error(), "--algo") != NULL,
           "ring_comm_open refuses cfg.algo = 4 before it opens anything");
    }
    ring_config_free(&cfg);
}

static void test_help(void)
{
    char *text = capture_print(NULL);
    int failed = 0;

    for (size_t i = 0; i < NTABLE; i++) {
        char flag[64];

        snprintf(flag, sizeof(flag), "  %s ", table_flags[i]);
        if (strstr(text, table_env[i]) == NULL || strstr(text, flag) == NULL) {
            diag("--help lacks %s or '%s'", table_env[i], flag);
            failed = 1;
        }
    }
    ok(!failed, "ring_config_print_help lists all 15 flags and RING_* variables");
    like(text, "env RING_CHUNK_SIZE, default 256K", "--help shows the chunk size default");
    like(text, "env RING_TIMEOUT, default 30s", "--help shows the timeout default");
    free(text);
}

int main(void)
{
    plan(98);
    test_parse_size();     /* 4 */
    test_parse_duration(); /* 2 */
    test_parse_long();     /* 2 */
    test_parse_ports();    /* 2 */
    test_format_size();    /* 1 */
    test_defaults();       /* 8 */
    test_set();            /* 18 */
    test_env();            /* 19 */
    test_parse_arg();      /* 11 */
    test_switches();
    test_choice_words();   /* 2 */
    test_validate();
    test_help();           /* 3 */
    return done_testing();
}
