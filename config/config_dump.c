/* config_dump.c — the effective configuration in libconfig syntax (secrets redacted),
 * and key-by-key comparison of two configurations. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* ---- dump and docs -------------------------------------------------------------- */

static void indent(FILE *out, int depth) {
    for (int i = 0; i < depth; i++) fputs("  ", out);
}

static void dump_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void dump_table(FILE *out, const key_t_ *keys, const void *base, int depth, int redact);

/* The shortest %g form that reads back as the same double, always with a '.' or an
 * exponent so libconfig reads a float. */
static void dump_double(FILE *out, double v) {
    char text[64];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(text, sizeof(text), "%.*g", prec, v);
        if (strtod(text, NULL) == v) break;
    }
    if (!strpbrk(text, ".eEn")) strcat(text, ".0");
    fputs(text, out);
}

/* A secret as a dump shows it: "(redacted)", or "" when it is empty. */
static void dump_secret(FILE *out, const char *prefix, int prefix_len, const char *value) {
    fprintf(out, "\"%.*s%s\"", prefix_len, prefix, *value ? "(redacted)" : "");
}

void bw_config_dump_value(FILE *out, const key_t_ *k, const void *base, int depth, int redact) {
    const char *p = (const char *)base + k->off;
    switch (k->kind) {
    case K_STR:
        if (redact && k->secret) dump_secret(out, "", 0, *(char *const *)p);
        else dump_string(out, *(char *const *)p);
        break;
    case K_INT: fprintf(out, "%d", *(const int *)p); break;
    case K_DBL: dump_double(out, *(const double *)p); break;
    case K_BOOL: fputs(*(const int *)p ? "true" : "false", out); break;
    case K_ENUM: dump_string(out, k->enums[*(const int *)p]); break;
    case K_STRLIST: {
        char *const *arr = *(char *const *const *)p;
        int n = *(const int *)((const char *)base + k->cnt_off);
        fputc('[', out);
        for (int i = 0; i < n; i++) {
            if (i) fputs(", ", out);
            const char *eq = strchr(arr[i], '=');
            if (redact && k->secret && eq && bw_config_secret_name(arr[i], (size_t)(eq - arr[i])))
                dump_secret(out, arr[i], (int)(eq - arr[i]) + 1, eq + 1);
            else dump_string(out, arr[i]);
        }
        fputc(']', out);
        break;
    }
    case K_LIST: {
        const char *arr = *(const char *const *)p;
        int n = *(const int *)((const char *)base + k->cnt_off);
        fputs("(\n", out);
        for (int i = 0; i < n; i++) {
            indent(out, depth + 1);
            fputs("{\n", out);
            dump_table(out, k->sub, arr + (size_t)i * k->elem_size, depth + 2, redact);
            indent(out, depth + 1);
            fputs(i + 1 < n ? "},\n" : "}\n", out);
        }
        indent(out, depth);
        fputc(')', out);
        break;
    }
    case K_GROUP:
        fputs("{\n", out);
        dump_table(out, k->sub, base, depth + 1, redact);
        indent(out, depth);
        fputc('}', out);
        break;
    }
}

static void dump_table(FILE *out, const key_t_ *keys, const void *base, int depth, int redact) {
    for (const key_t_ *k = keys; k->name; k++) {
        indent(out, depth);
        fprintf(out, "%s = ", k->name);
        bw_config_dump_value(out, k, base, depth, redact);
        fputs(";\n", out);
    }
}

int bw_config_same(const bw_config_t *a, const bw_config_t *b, const char *key) {
    for (const key_t_ *k = bw_config_top_keys; k->name; k++) {
        if (strcmp(k->name, key)) continue;
        char *ta = NULL, *tb = NULL;
        size_t la = 0, lb = 0;
        FILE *fa = open_memstream(&ta, &la), *fb = open_memstream(&tb, &lb);
        bw_config_dump_value(fa, k, a, 0, 0); /* secrets too: a changed password is a change */
        bw_config_dump_value(fb, k, b, 0, 0);
        fclose(fa);
        fclose(fb);
        int same = la == lb && memcmp(ta, tb, la) == 0;
        free(ta);
        free(tb);
        return same;
    }
    return -1;
}

void bw_config_dump(const bw_config_t *c, FILE *out) {
    fprintf(out, "# effective configuration of %s\n", c->path ? c->path : "(defaults)");
    /* dotted keys are written inside their section: kafka = { brokers = ...; }; */
    const char *section = NULL;
    size_t section_len = 0;
    for (const key_t_ *k = bw_config_top_keys; k->name; k++) {
        const char *dot = strchr(k->name, '.');
        size_t len = dot ? (size_t)(dot - k->name) : 0;
        if (section && (len != section_len || strncmp(section, k->name, len) != 0)) {
            fputs("};\n", out);
            section = NULL;
        }
        if (dot && !section) {
            fprintf(out, "%.*s = {\n", (int)len, k->name);
            section = k->name;
            section_len = len;
        }
        int depth = section ? 1 : 0;
        indent(out, depth);
        fprintf(out, "%s = ", section ? dot + 1 : k->name);
        bw_config_dump_value(out, k, c, depth, 1);
        fputs(";\n", out);
    }
    if (section) fputs("};\n", out);
}

