/*
 * seccomp_exec RULES -- PROGRAM [ARG...]: load a seccomp filter described by
 * the file RULES (libseccomp), then exec PROGRAM under it, as a container
 * runtime does before it starts a container's process. The filter is
 * inherited by every child and thread, and cannot be removed.
 *
 * RULES, one rule a line (tests/python/test_seccomp.py writes them, from
 * deploy/seccomp/m0serve.json or by hand):
 *
 *   default allow | default errno N   the action for every other syscall (first line)
 *   allow NAME [COND...]               allow NAME where all CONDs hold
 *   errno N NAME [COND...]             fail NAME with errno N where all CONDs hold
 *
 * COND is ARG:OP:VALUE[:VALUE2], OP one of ne lt le eq ge gt masked_eq
 * (masked_eq: (arg & VALUE) == VALUE2), the ops of Docker's profile format.
 * A NAME this architecture does not have is skipped (Docker's profile lists
 * every architecture's names), and counted on stderr.
 *
 * Exit status: 126 when the rules cannot be read or loaded (one line on
 * stderr), else whatever PROGRAM does; 127 when the exec fails.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONDS 6

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "seccomp_exec: %s: %s\n", what, detail);
    return 126;
}

static int parse_op(const char *s, enum scmp_compare *op)
{
    static const struct {
        const char *name;
        enum scmp_compare op;
    } ops[] = {
        {"ne", SCMP_CMP_NE}, {"lt", SCMP_CMP_LT}, {"le", SCMP_CMP_LE}, {"eq", SCMP_CMP_EQ},
        {"ge", SCMP_CMP_GE}, {"gt", SCMP_CMP_GT}, {"masked_eq", SCMP_CMP_MASKED_EQ},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(s, ops[i].name) == 0) {
            *op = ops[i].op;
            return 0;
        }
    }
    return -1;
}

/* ARG:OP:VALUE[:VALUE2] */
static int parse_cond(char *s, struct scmp_arg_cmp *cond)
{
    char *save;
    char *arg = strtok_r(s, ":", &save), *op = strtok_r(NULL, ":", &save);
    char *a = strtok_r(NULL, ":", &save), *b = strtok_r(NULL, ":", &save);
    enum scmp_compare cmp;
    if (arg == NULL || op == NULL || a == NULL || parse_op(op, &cmp) != 0) {
        return -1;
    }
    cond->arg = (unsigned int)strtoul(arg, NULL, 10);
    cond->op = cmp;
    cond->datum_a = strtoull(a, NULL, 0);
    cond->datum_b = b ? strtoull(b, NULL, 0) : 0;
    return 0;
}

/* The action of "allow" or "errno N" at the start of a rule; *rest is what follows. */
static int parse_action(char *line, uint32_t *action, char **rest)
{
    char *word = strtok_r(line, " \t\n", rest);
    if (word == NULL) {
        return -1;
    }
    if (strcmp(word, "allow") == 0) {
        *action = SCMP_ACT_ALLOW;
        return 0;
    }
    if (strcmp(word, "errno") == 0) {
        char *n = strtok_r(NULL, " \t\n", rest);
        if (n == NULL) {
            return -1;
        }
        *action = SCMP_ACT_ERRNO((uint16_t)strtoul(n, NULL, 10));
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: seccomp_exec RULES -- PROGRAM [ARG...]\n");
        return 126;
    }
    FILE *rules = fopen(argv[1], "r");
    if (rules == NULL) {
        return fail(argv[1], strerror(errno));
    }
    char line[4096], *rest;
    uint32_t default_action;
    if (fgets(line, sizeof line, rules) == NULL || strncmp(line, "default ", 8) != 0 ||
        parse_action(line + 8, &default_action, &rest) != 0) {
        return fail(argv[1], "the first line must be `default allow` or `default errno N`");
    }
    /* seccomp_init sets no_new_privs, which an unprivileged filter needs. */
    scmp_filter_ctx ctx = seccomp_init(default_action);
    if (ctx == NULL) {
        return fail("seccomp_init", "failed");
    }
    int rules_added = 0, unknown = 0, lineno = 1;
    while (fgets(line, sizeof line, rules) != NULL) {
        lineno++;
        uint32_t action;
        if (line[0] == '\n' || line[0] == '#') {
            continue;
        }
        char *name;
        if (parse_action(line, &action, &rest) != 0 || (name = strtok_r(NULL, " \t\n", &rest)) == NULL) {
            fprintf(stderr, "seccomp_exec: %s:%d: not a rule\n", argv[1], lineno);
            return 126;
        }
        struct scmp_arg_cmp conds[MAX_CONDS];
        unsigned int n = 0;
        char *word;
        while ((word = strtok_r(NULL, " \t\n", &rest)) != NULL) {
            if (n == MAX_CONDS || parse_cond(word, &conds[n]) != 0) {
                fprintf(stderr, "seccomp_exec: %s:%d: bad condition\n", argv[1], lineno);
                return 126;
            }
            n++;
        }
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR) {
            unknown++;
            continue;
        }
        /* libseccomp refuses a rule whose action is the default's: it adds nothing. */
        if (action == default_action) {
            continue;
        }
        int rc = seccomp_rule_add_array(ctx, action, nr, n, conds);
        if (rc != 0) {
            fprintf(stderr, "seccomp_exec: %s:%d: %s: %s\n", argv[1], lineno, name, strerror(-rc));
            return 126;
        }
        rules_added++;
    }
    fclose(rules);
    int rc = seccomp_load(ctx);
    if (rc != 0) {
        return fail("seccomp_load", strerror(-rc));
    }
    seccomp_release(ctx);
    fprintf(stderr, "seccomp_exec: %d rules loaded, %d names unknown on this architecture\n", rules_added,
            unknown);
    execv(argv[3], argv + 3);
    fprintf(stderr, "seccomp_exec: exec %s: %s\n", argv[3], strerror(errno));
    return 127;
}
