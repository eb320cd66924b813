/*
 * opt_table.h - one engine for option tables (opt_table.c): libringd's
 * communicator settings (bootstrap/config.c) and the daemon's training
 * options (daemon/options.c) are each a table of ring_opt_t, and everything
 * a user sees of them comes from here: --flag VALUE and --flag=VALUE, RING_*
 * variables, switches (--flag alone, --no-flag, --flag on|off), choices,
 * the error for a bad value, --help and --print-config.
 *
 * An entry describes one field of a settings struct (offset, size); the
 * struct keeps an `unsigned char source[]` (ring_opt_source_t values) at
 * the table's source_offset, so --print-config can say where each value came
 * from. Defaults are text, parsed like user input.
 */
#ifndef RING_OPT_TABLE_H
#define RING_OPT_TABLE_H

#include <stddef.h>
#include <stdio.h>

/* Where a value came from: the values of the public ring_config_source_t
 * (ringd/config.h, whose RING_SRC_* bootstrap/config.c checks against these). */
typedef enum ring_opt_source {
    RING_OPT_SRC_DEFAULT = 0,
    RING_OPT_SRC_ENV,
    RING_OPT_SRC_FLAG,
    RING_OPT_SRC_API,
    RING_OPT_SRC_LAUNCHER
} ring_opt_source_t;

typedef enum ring_opt_type {
    RING_OPT_INT,      /* int within min..max */
    RING_OPT_LONG,     /* long within min..max */
    RING_OPT_COUNT,    /* uint64_t with decimal K/M/G suffixes (25M = 25,000,000); >= min */
    RING_OPT_DOUBLE,   /* double >= 0 */
    RING_OPT_SIZE,     /* size_t bytes with binary K/M/G suffixes (64K = 65536); >= min */
    RING_OPT_DURATION, /* double seconds: 90, 90s, 500ms, 2m, 1h; min == -1: "auto" is -1 */
    RING_OPT_RATE,     /* double bytes/s, tc-style units (1gbit, 125mbps); 0 = unlimited */
    RING_OPT_STRING,   /* char[size] */
    RING_OPT_SECRET,   /* char[size], never shown: "(set)" or "" */
    RING_OPT_WORD,     /* char[size]: one of the '|'-separated words of unit */
    RING_OPT_CHOICE,   /* int: the index of the value among the '|'-separated words of unit;
                        * words exactly on and off (either order): 1 on, 0 off */
    RING_OPT_SWITCH,   /* int 1/0: on/off (also 1/0, yes/no, true/false) */
    RING_OPT_CUSTOM    /* the table's parse and format functions, which tell entries by name */
} ring_opt_type_t;

struct ring_opt;
/* RING_OPT_CUSTOM: store value into settings for entry e: 0, or -1 with why (the
 * reason alone; the engine says which option and what it expects). */
typedef int (*ring_opt_parse_fn)(void *settings, const struct ring_opt *e, const char *value,
                                 char *why, size_t len);
typedef void (*ring_opt_format_fn)(const void *settings, const struct ring_opt *e, char *buf,
                                   size_t len);

typedef struct ring_opt {
    const char *name;   /* the flag, without "--" */
    const char *env;    /* its RING_* variable */
    ring_opt_type_t type;
    const char *defval; /* text, parsed like user input */
    const char *unit;   /* --help's placeholder; the words of WORD and CHOICE */
    size_t offset, size;
    long min, max;
    const char *doc;
} ring_opt_t;

typedef struct ring_opt_table {
    const ring_opt_t *entries;
    size_t count;
    size_t source_offset; /* offsetof(settings struct, source): unsigned char[count] */
    ring_opt_parse_fn parse;   /* its RING_OPT_CUSTOM entries (NULL: it has none) */
    ring_opt_format_fn format;
} ring_opt_table_t;

/* The entry named name (len bytes; leading dashes ignored), or NULL. */
const ring_opt_t *ring_opt_find(const ring_opt_table_t *t, const char *name, size_t len);

/* 1 when the entry takes --flag alone (on) and --no-flag (off): SWITCH, and WORD or
 * CHOICE entries whose words are exactly on and off. */
int ring_opt_is_switch(const ring_opt_t *e);

/* Parse value into entry e of table t: 0, or -1 with the whole message in err
 * ("invalid value 'x' for --codec (RING_CODEC): not one of the choices; expected ..."). */
int ring_opt_apply(const ring_opt_table_t *t, const ring_opt_t *e, void *settings,
                   const char *value, char *err, size_t errlen);

/* Every entry's default, every source RING_OPT_SRC_DEFAULT: 0, or -1 (a bug in the table). */
int ring_opt_defaults(const ring_opt_table_t *t, void *settings, char *err, size_t errlen);

/* Every CHOICE and SWITCH field holds one of its values (a program may have
 * written the int itself): 0, or -1 with err naming the first that does not. */
int ring_opt_check_choices(const ring_opt_table_t *t, const void *settings, char *err,
                           size_t errlen);

/* The table's RING_* variables that are set: 0, or -1 with err. */
int ring_opt_load_env(const ring_opt_table_t *t, void *settings, char *err, size_t errlen);

/* 1 when var (len bytes, no '=') is one of the table's variables. */
int ring_opt_env_known(const ring_opt_table_t *t, const char *var, size_t len);

/*
 * argv[*i], one of the table's flags? 1: consumed (one or two words; *i moves past
 * them), 0: not one of its flags (*i unchanged), -1: its flag with a bad or missing
 * value (err says which).
 */
int ring_opt_parse_arg(const ring_opt_table_t *t, void *settings, int argc, char **argv,
                       int *i, char *err, size_t errlen);

/* Word idx (from 0) of the '|'-separated words ("" past the last) into buf, as the
 * engine shows a CHOICE: for a RING_OPT_CUSTOM entry that stores one as an int. */
void ring_opt_word(const char *words, int idx, char *buf, size_t len);

/* The value as --print-config shows it (and ring_config_get returns it). */
void ring_opt_format(const ring_opt_table_t *t, const ring_opt_t *e, const void *settings,
                     char *buf, size_t len);

/* --help: every entry with its placeholder, doc, variable and default. */
void ring_opt_print_help(const ring_opt_table_t *t, FILE *out);
/* The same, with the values of settings that still have their default (source
 * RING_OPT_SRC_DEFAULT) shown as the default: a program that sets its own defaults. */
void ring_opt_print_help_with(const ring_opt_table_t *t, const void *settings, FILE *out);

/* --print-config: name, value, (where from, variable). detail, when not NULL, adds
 * a word after the source (the launcher variable behind a value). */
void ring_opt_print(const ring_opt_table_t *t, const void *settings, FILE *out,
                    const char *(*detail)(const void *settings, const ring_opt_t *e));

/* "Did you mean": the entry closest to word, a mistyped flag (leading dashes and
 * "=value" ignored) or, when word starts with RING_, variable; extra_flags (names
 * without dashes) and extra_env (variables), NULL-terminated or NULL, are candidates
 * too. 1 with "--name" or the variable in buf, or 0 when none is close enough. */
int ring_opt_closest(const ring_opt_table_t *t, const char *word, const char *const *extra_flags,
                     const char *const *extra_env, char *buf, size_t len);

/* The source names, indexed by ring_opt_source_t. */
const char *ring_opt_source_name(unsigned source);

#endif /* RING_OPT_TABLE_H */
