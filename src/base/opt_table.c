/*
 * opt_table.c - the option-table engine (opt_table.h): parsing, the RING_*
 * variables, switches, --help and --print-config for every table, so the
 * library's settings and the daemon's options behave alike.
 */
#include "ring_build.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "opt_table.h"
#include "suggest.h"
#include "parse.h"

/* indexed by ring_opt_source_t */
static const char *const source_names[] = {"default", "environment", "flag", "api", "launcher"};

const char *ring_opt_source_name(unsigned source)
{
    return source < sizeof(source_names) / sizeof(source_names[0]) ? source_names[source]
                                                                    : source_names[0];
}

static unsigned char *source_of(const ring_opt_table_t *t, void *settings)
{
    return (unsigned char *)settings + t->source_offset;
}

const ring_opt_t *ring_opt_find(const ring_opt_table_t *t, const char *name, size_t len)
{
    while (len > 0 && name[0] == '-')
        name++, len--;
    for (size_t i = 0; i < t->count; i++)
        if (strlen(t->entries[i].name) == len && strncmp(t->entries[i].name, name, len) == 0)
            return &t->entries[i];
    return NULL;
}

/* The index of word in the '|'-separated list, or -1. */
static int word_index(const char *list, const char *word)
{
    size_t wl = strlen(word);
    int idx = 0;

    for (const char *p = list; *p != '\0'; idx++) {
        size_t n = strcspn(p, "|");
        if (wl > 0 && n == wl && strncmp(p, word, n) == 0)
            return idx;
        p += n;
        if (*p == '|')
            p++;
    }
    return -1;
}

void ring_opt_word(const char *list, int idx, char *buf, size_t len)
{
    const char *p = list;

    for (int i = 0; i < idx && *p != '\0'; i++) {
        p += strcspn(p, "|");
        if (*p == '|')
            p++;
    }
    snprintf(buf, len, "%.*s", (int)strcspn(p, "|"), p);
}

int ring_opt_is_switch(const ring_opt_t *e)
{
    return e->type == RING_OPT_SWITCH ||
           ((e->type == RING_OPT_WORD || e->type == RING_OPT_CHOICE) &&
            (strcmp(e->unit, "on|off") == 0 || strcmp(e->unit, "off|on") == 0));
}

/* on/off and their usual spellings: 1 or 0, or -1. */
static int switch_value(const char *v)
{
    static const char *const yes[] = {"on", "1", "yes", "true", NULL};
    static const char *const no[] = {"off", "0", "no", "false", NULL};

    for (int i = 0; yes[i] != NULL; i++)
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
    for (int i = 0; no[i] != NULL; i++)
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    return -1;
}

/* A decimal count with an optional K/M/G suffix: 25M = 25e6. */
static int parse_count(const char *v, uint64_t *out)
{
    char *end;
    double d, mult = 1;

    errno = 0;
    d = strtod(v, &end);
    if (end == v || errno != 0 || !(d >= 0))
        return -1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1e3, end++; break;
    case 'M': mult = 1e6, end++; break;
    case 'G': mult = 1e9, end++; break;
    default: break;
    }
    d *= mult;
    if (*end != '\0' || d > 1.8e19 || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

/* An integer that also takes "auto" (stored as -1, the caller decides): its entry has
 * min -1 and says so in its placeholder ("K|auto"); other integers with min -1 keep
 * -1 as a number (the library's "rank not set"). */
static int long_auto(const ring_opt_t *e)
{
    return e->type == RING_OPT_LONG && e->min == -1 && e->unit != NULL &&
           strstr(e->unit, "auto") != NULL;
}

static int bad(const ring_opt_t *e, const char *value, const char *why, char *err, size_t errlen)
{
    snprintf(err, errlen, "invalid value '%s' for --%s (%s): %s; expected %s", value, e->name,
             e->env, why, e->unit[0] ? e->unit : "a number");
    return -1;
}

/* The switch forms of a WORD or CHOICE of on/off: store the canonical word. */
static int apply_word(const ring_opt_t *e, char *field, const char *v, char *err, size_t errlen)
{
    int k = word_index(e->unit, v);

    if (k < 0 && ring_opt_is_switch(e) && switch_value(v) >= 0)
        k = word_index(e->unit, switch_value(v) ? "on" : "off");
    if (k < 0) {
        ring_suggest_t sg;
        char why[RING_SUGGEST_MAX + 48];

        ring_suggest_init(&sg, v, strlen(v));
        ring_suggest_offer_words(&sg, e->unit);
        if (ring_suggest_best(&sg) != NULL)
            snprintf(why, sizeof(why), "not one of the choices (did you mean '%s'?)",
                     ring_suggest_best(&sg));
        else
            snprintf(why, sizeof(why), "not one of the choices");
        return bad(e, v, why, err, errlen);
    }
    if (e->type == RING_OPT_CHOICE) {
        /* on/off in either order: 1 on, 0 off, as a SWITCH */
        *(int *)field = ring_opt_is_switch(e) ? k == word_index(e->unit, "on") : k;
        return 0;
    }
    ring_opt_word(e->unit, k, field, e->size);
    return 0;
}

int ring_opt_apply(const ring_opt_table_t *t, const ring_opt_t *e, void *settings, const char *v,
                   char *err, size_t errlen)
{
    char *field = (char *)settings + e->offset;
    char why[128];
    long l;
    double d;
    size_t sz;
    int k;

    switch (e->type) {
    case RING_OPT_INT:
    case RING_OPT_LONG:
        if (long_auto(e) && strcmp(v, "auto") == 0) {
            *(long *)field = -1; /* the caller decides */
            return 0;
        }
        if (ring_parse_long(v, &l) != 0)
            return bad(e, v, "not an integer", err, errlen);
        if (l < (long_auto(e) ? 0 : e->min) || l > e->max) { /* -1 stands for auto */
            snprintf(why, sizeof(why), "out of range %ld..%ld%s", long_auto(e) ? 0 : e->min,
                     e->max, long_auto(e) ? ", or auto" : "");
            return bad(e, v, why, err, errlen);
        }
        if (e->type == RING_OPT_LONG)
            *(long *)field = l;
        else
            *(int *)field = (int)l;
        return 0;
    case RING_OPT_COUNT:
        if (parse_count(v, (uint64_t *)field) != 0)
            return bad(e, v, "not a whole number", err, errlen);
        if (e->min > 0 && *(uint64_t *)field < (uint64_t)e->min) {
            snprintf(why, sizeof(why), "must be at least %ld", e->min);
            return bad(e, v, why, err, errlen);
        }
        return 0;
    case RING_OPT_DOUBLE: {
        char *end;
        errno = 0;
        d = strtod(v, &end);
        if (end == v || *end != '\0' || errno != 0 || !isfinite(d) || d < 0)
            return bad(e, v, "not a non-negative number", err, errlen);
        *(double *)field = d;
        return 0;
    }
    case RING_OPT_SIZE:
        if (ring_parse_size(v, &sz) != 0)
            return bad(e, v, "not a size (e.g. 4096, 64K, 1M, 2G)", err, errlen);
        if (sz < (size_t)(e->min > 0 ? e->min : 0))
            return bad(e, v, "too small", err, errlen);
        *(size_t *)field = sz;
        return 0;
    case RING_OPT_DURATION:
        if (e->min == -1 && strcmp(v, "auto") == 0) {
            *(double *)field = -1; /* the caller decides */
            return 0;
        }
        if (ring_parse_duration(v, &d) != 0 || d < 0)
            return bad(e, v, "not a duration (e.g. 30, 30s, 500ms, 2m)", err, errlen);
        *(double *)field = d;
        return 0;
    case RING_OPT_RATE:
        if (ring_parse_rate(v, &d) != 0)
            return bad(e, v, "not a rate (e.g. 1gbit, 500mbit, 125mbps, 0)", err, errlen);
        *(double *)field = d;
        return 0;
    case RING_OPT_STRING:
        if (strlen(v) >= e->size)
            return bad(e, v, "too long", err, errlen);
        memcpy(field, v, strlen(v) + 1);
        return 0;
    case RING_OPT_SECRET:
        /* never echo a secret back */
        if (strlen(v) >= e->size) {
            snprintf(err, errlen, "--%s (%s): longer than %zu bytes: put it in a file and give "
                     "--%s-file", e->name, e->env, e->size - 1, e->name);
            return -1;
        }
        memcpy(field, v, strlen(v) + 1);
        return 0;
    case RING_OPT_WORD:
    case RING_OPT_CHOICE:
        return apply_word(e, field, v, err, errlen);
    case RING_OPT_SWITCH:
        if ((k = switch_value(v)) < 0)
            return bad(e, v, "not on or off", err, errlen);
        *(int *)field = k;
        return 0;
    case RING_OPT_CUSTOM:
        if (t->parse == NULL || t->parse(settings, e, v, why, sizeof(why)) != 0)
            return bad(e, v, why, err, errlen);
        return 0;
    }
    snprintf(err, errlen, "internal: option --%s has no parser", e->name);
    return -1;
}

int ring_opt_defaults(const ring_opt_table_t *t, void *settings, char *err, size_t errlen)
{
    int rc = 0;

    for (size_t i = 0; i < t->count; i++) {
        /* defaults are parsed like user input; a failure is a bug in the table */
        if (ring_opt_apply(t, &t->entries[i], settings, t->entries[i].defval, err, errlen) != 0)
            rc = -1;
        source_of(t, settings)[i] = RING_OPT_SRC_DEFAULT;
    }
    return rc;
}

int ring_opt_check_choices(const ring_opt_table_t *t, const void *settings, char *err,
                           size_t errlen)
{
    for (size_t i = 0; i < t->count; i++) {
        const ring_opt_t *e = &t->entries[i];
        const char *words = e->type == RING_OPT_SWITCH ? "off|on" : e->unit;
        int v, n = 1;

        if (e->type != RING_OPT_CHOICE && e->type != RING_OPT_SWITCH)
            continue;
        for (const char *p = words; *p != '\0'; p++)
            n += *p == '|';
        v = *(const int *)((const char *)settings + e->offset);
        if (v < 0 || v >= n) {
            snprintf(err, errlen, "--%s (%s) holds %d, which is none of its %d values (%s)",
                     e->name, e->env, v, n, words);
            return -1;
        }
    }
    return 0;
}

int ring_opt_load_env(const ring_opt_table_t *t, void *settings, char *err, size_t errlen)
{
    for (size_t i = 0; i < t->count; i++) {
        const char *v = getenv(t->entries[i].env);

        if (v == NULL)
            continue;
        if (ring_opt_apply(t, &t->entries[i], settings, v, err, errlen) != 0)
            return -1;
        source_of(t, settings)[i] = RING_OPT_SRC_ENV;
    }
    return 0;
}

int ring_opt_env_known(const ring_opt_table_t *t, const char *var, size_t len)
{
    for (size_t i = 0; i < t->count; i++)
        if (strlen(t->entries[i].env) == len && strncmp(t->entries[i].env, var, len) == 0)
            return 1;
    return 0;
}

int ring_opt_parse_arg(const ring_opt_table_t *t, void *settings, int argc, char **argv,
                       int *i, char *err, size_t errlen)
{
    const char *arg = argv[*i], *name, *eq, *value;
    const ring_opt_t *e;
    size_t len;
    int negated = 0;

    if (strncmp(arg, "--", 2) != 0)
        return 0;
    name = arg + 2;
    eq = strchr(name, '=');
    len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    e = ring_opt_find(t, name, len);
    if (e == NULL && len > 3 && strncmp(name, "no-", 3) == 0) {
        e = ring_opt_find(t, name + 3, len - 3);
        if (e == NULL || !ring_opt_is_switch(e))
            return 0;
        if (eq != NULL) {
            snprintf(err, errlen, "--no-%s takes no value (give --%s=on|off instead)", e->name,
                     e->name);
            return -1;
        }
        negated = 1;
    }
    if (e == NULL)
        return 0;
    if (negated) {
        value = "off";
        (*i)++;
    } else if (ring_opt_is_switch(e) && eq == NULL) {
        /* --flag alone is on; --flag on|off (any spelling) takes the next word */
        if (*i + 1 < argc && switch_value(argv[*i + 1]) >= 0) {
            value = argv[*i + 1];
            *i += 2;
        } else {
            value = "on";
            (*i)++;
        }
    } else if (eq != NULL) {
        value = eq + 1;
        (*i)++;
    } else {
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "option --%s needs a value (%s)", e->name,
                     e->unit[0] ? e->unit : "a number");
            return -1;
        }
        value = argv[*i + 1];
        *i += 2;
    }
    if (ring_opt_apply(t, e, settings, value, err, errlen) != 0)
        return -1;
    source_of(t, settings)[e - t->entries] = RING_OPT_SRC_FLAG;
    return 1;
}

void ring_opt_format(const ring_opt_table_t *t, const ring_opt_t *e, const void *settings,
                     char *buf, size_t len)
{
    const char *field = (const char *)settings + e->offset;
    double d;

    switch (e->type) {
    case RING_OPT_INT: snprintf(buf, len, "%d", *(const int *)field); break;
    case RING_OPT_LONG:
        if (long_auto(e) && *(const long *)field == -1)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%ld", *(const long *)field);
        break;
    case RING_OPT_COUNT:
        snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case RING_OPT_DOUBLE: snprintf(buf, len, "%g", *(const double *)field); break;
    case RING_OPT_SIZE: ring_format_size(*(const size_t *)field, buf, len); break;
    case RING_OPT_DURATION:
        d = *(const double *)field;
        if (d < 0)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%gs", d);
        break;
    case RING_OPT_RATE: ring_format_rate(*(const double *)field, buf, len); break;
    case RING_OPT_SECRET: snprintf(buf, len, "%s", field[0] != '\0' ? "(set)" : ""); break;
    case RING_OPT_CHOICE:
        if (ring_opt_is_switch(e))
            snprintf(buf, len, "%s", *(const int *)field ? "on" : "off");
        else
            ring_opt_word(e->unit, *(const int *)field, buf, len);
        break;
    case RING_OPT_SWITCH: snprintf(buf, len, "%s", *(const int *)field ? "on" : "off"); break;
    case RING_OPT_CUSTOM:
        if (t->format != NULL)
            t->format(settings, e, buf, len);
        else
            snprintf(buf, len, "?");
        break;
    case RING_OPT_STRING:
    case RING_OPT_WORD: snprintf(buf, len, "%s", field); break;
    }
}

void ring_opt_print_help(const ring_opt_table_t *t, FILE *out)
{
    ring_opt_print_help_with(t, NULL, out);
}

void ring_opt_print_help_with(const ring_opt_table_t *t, const void *settings, FILE *out)
{
    const unsigned char *source =
        settings != NULL ? (const unsigned char *)settings + t->source_offset : NULL;
    char value[4608];

    for (size_t i = 0; i < t->count; i++) {
        const ring_opt_t *e = &t->entries[i];
        const char *def = e->defval;

        /* a program that changed a default (ringd's fp16) shows its own */
        if (source != NULL && source[i] == RING_OPT_SRC_DEFAULT) {
            ring_opt_format(t, e, settings, value, sizeof(value));
            def = value;
        }
        if (ring_opt_is_switch(e))
            fprintf(out, "  --%s, --no-%s\n", e->name, e->name);
        else
            fprintf(out, "  --%s %s\n", e->name, e->unit[0] ? e->unit : "N");
        fprintf(out, "      %s\n      env %s, default %s\n", e->doc, e->env,
                def[0] ? def : "(none)");
    }
}

void ring_opt_print(const ring_opt_table_t *t, const void *settings, FILE *out,
                    const char *(*detail)(const void *settings, const ring_opt_t *e))
{
    const unsigned char *source = (const unsigned char *)settings + t->source_offset;
    /* the same columns for every table printed one after the other (ringd prints its
     * own and the ring's): wide enough for the longest names and common values */
    int name_w = 22, value_w = 32;
    char value[4608];

    /* wider where a name or (up to 40) a value needs it */
    for (size_t i = 0; i < t->count; i++) {
        int n = (int)strlen(t->entries[i].name), v;
        ring_opt_format(t, &t->entries[i], settings, value, sizeof(value));
        v = (int)strlen(value);
        name_w = n > name_w ? n : name_w;
        value_w = v > value_w && v <= 40 ? v : value_w;
    }
    for (size_t i = 0; i < t->count; i++) {
        const ring_opt_t *e = &t->entries[i];
        const char *more = detail != NULL ? detail(settings, e) : "";

        ring_opt_format(t, e, settings, value, sizeof(value));
        fprintf(out, "%-*s %-*s (%s%s%s, %s)\n", name_w, e->name, value_w,
                value[0] ? value : "\"\"", ring_opt_source_name(source[i]),
                more[0] ? " " : "", more, e->env);
    }
}

int ring_opt_closest(const ring_opt_table_t *t, const char *word, const char *const *extra_flags,
                     const char *const *extra_env, char *buf, size_t len)
{
    int env = strncmp(word, "RING_", 5) == 0;
    const char *const *extra = env ? extra_env : extra_flags;
    ring_suggest_t sg;

    while (*word == '-')
        word++;
    ring_suggest_init(&sg, word, strcspn(word, "="));
    for (size_t i = 0; i < t->count; i++) {
        const char *w = env ? t->entries[i].env : t->entries[i].name;

        if (w != NULL)
            ring_suggest_offer(&sg, w, strlen(w));
    }
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        ring_suggest_offer(&sg, extra[i], strlen(extra[i]));
    if (ring_suggest_best(&sg) == NULL || len == 0)
        return 0;
    snprintf(buf, len, "%s%s", env ? "" : "--", ring_suggest_best(&sg));
    return 1;
}
