// A small JSON reader for a Piper voice's MODEL.onnx.json: a document becomes a tree of values
// in one allocation-per-value arena. The file is untrusted: every read is bounds-checked, the
// depth is limited, and a malformed document is refused with where it went wrong.
#include "piper_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end, *start;
    int depth;
    char *error;
    size_t error_size;
} parser;

static pj_value *fail(parser *ps, const char *what) {
    if (ps->error && ps->error[0] == 0) snprintf(ps->error, ps->error_size, "%s at byte %ld", what, (long)(ps->p - ps->start));
    return NULL;
}

static void skip_space(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static pj_value *new_value(int type) {
    pj_value *v = calloc(1, sizeof *v);
    if (v) v->type = type;
    return v;
}

void pj_free(pj_value *v) {
    while (v) {
        pj_value *next = v->next;
        pj_free(v->child);
        free(v->string);
        free(v->key);
        free(v);
        v = next;
    }
}

void piper_put_utf8(char *out, size_t *n, uint32_t c) {
    if (c < 0x80) out[(*n)++] = (char)c;
    else if (c < 0x800) { out[(*n)++] = (char)(0xC0 | c >> 6); out[(*n)++] = (char)(0x80 | (c & 0x3F)); }
    else if (c < 0x10000) {
        out[(*n)++] = (char)(0xE0 | c >> 12); out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3F)); out[(*n)++] = (char)(0x80 | (c & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | c >> 18); out[(*n)++] = (char)(0x80 | ((c >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3F)); out[(*n)++] = (char)(0x80 | (c & 0x3F));
    }
}

static int hex4(parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    ps->p += 4;
    *out = v;
    return 1;
}

// Reads a string (ps->p at its opening quote) into a new NUL-terminated UTF-8 buffer.
static char *read_string(parser *ps, size_t *length) {
    ps->p++;
    const char *s = ps->p;
    size_t cap = 0;
    while (s < ps->end && *s != '"') { if (*s == '\\') s++; s++; cap++; }
    char *out = malloc(cap * 4 + 1);
    if (!out) { fail(ps, "out of memory"); return NULL; }
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20) { free(out); fail(ps, "a control character in a string"); return NULL; }
        if (c != '\\') { out[n++] = (char)c; continue; }
        if (ps->p >= ps->end) break;
        char e = *ps->p++;
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            uint32_t c1;
            if (!hex4(ps, &c1)) { free(out); fail(ps, "a bad \\u escape"); return NULL; }
            if (c1 >= 0xD800 && c1 < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
                ps->p += 2;
                uint32_t c2;
                if (!hex4(ps, &c2) || c2 < 0xDC00 || c2 > 0xDFFF) { free(out); fail(ps, "a bad surrogate pair"); return NULL; }
                c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
            } else if (c1 >= 0xD800 && c1 < 0xE000) {
                c1 = 0xFFFD;
            }
            piper_put_utf8(out, &n, c1);
            break;
        }
        default: free(out); fail(ps, "a bad escape"); return NULL;
        }
    }
    if (ps->p >= ps->end) { free(out); fail(ps, "an unterminated string"); return NULL; }
    ps->p++;
    out[n] = 0;
    if (length) *length = n;
    return out;
}

static pj_value *parse_value(parser *ps);

static pj_value *parse_container(parser *ps, int object) {
    if (++ps->depth > 64) return fail(ps, "nesting too deep");
    ps->p++;
    pj_value *v = new_value(object ? PJ_OBJECT : PJ_ARRAY);
    if (!v) return fail(ps, "out of memory");
    pj_value **tail = &v->child;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) { ps->p++; ps->depth--; return v; }
    for (;;) {
        skip_space(ps);
        char *key = NULL;
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') { pj_free(v); return fail(ps, "expected a key"); }
            key = read_string(ps, NULL);
            if (!key) { pj_free(v); return NULL; }
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ':') { free(key); pj_free(v); return fail(ps, "expected ':'"); }
            ps->p++;
        }
        pj_value *item = parse_value(ps);
        if (!item) { free(key); pj_free(v); return NULL; }
        item->key = key;
        *tail = item;
        tail = &item->next;
        v->count++;
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) { ps->p++; break; }
        pj_free(v);
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    ps->depth--;
    return v;
}

static pj_value *parse_value(parser *ps) {
    skip_space(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end");
    char c = *ps->p;
    if (c == '{' || c == '[') return parse_container(ps, c == '{');
    if (c == '"') {
        pj_value *v = new_value(PJ_STRING);
        if (!v) return fail(ps, "out of memory");
        v->string = read_string(ps, &v->length);
        if (!v->string) { free(v); return NULL; }
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buffer[64];
        size_t n = 0;
        while (ps->p < ps->end && n < sizeof buffer - 1 && strchr("+-0123456789.eE", *ps->p)) buffer[n++] = *ps->p++;
        buffer[n] = 0;
        char *after = NULL;
        double d = strtod(buffer, &after);
        if (after == buffer || *after) return fail(ps, "a bad number");
        pj_value *v = new_value(PJ_NUMBER);
        if (!v) return fail(ps, "out of memory");
        v->number = d;
        return v;
    }
    static const struct { const char *word; int type; int truth; } words[] = {
        { "true", PJ_BOOL, 1 }, { "false", PJ_BOOL, 0 }, { "null", PJ_NULL, 0 } };
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, words[i].word, n) == 0) {
            ps->p += n;
            pj_value *v = new_value(words[i].type);
            if (!v) return fail(ps, "out of memory");
            v->number = words[i].truth;
            return v;
        }
    }
    return fail(ps, "unexpected character");
}

pj_value *pj_parse(const char *text, size_t length, char *error, size_t error_size) {
    parser ps = { text, text + length, text, 0, error, error_size };
    if (error && error_size) error[0] = 0;
    pj_value *v = parse_value(&ps);
    if (!v) return NULL;
    skip_space(&ps);
    if (ps.p != ps.end) { pj_free(v); fail(&ps, "text after the document"); return NULL; }
    return v;
}

const pj_value *pj_get(const pj_value *object, const char *key) {
    if (!object || object->type != PJ_OBJECT) return NULL;
    for (const pj_value *v = object->child; v; v = v->next)
        if (v->key && strcmp(v->key, key) == 0) return v;
    return NULL;
}

double pj_number(const pj_value *v, double fallback) {
    return v && v->type == PJ_NUMBER ? v->number : fallback;
}

const char *pj_string(const pj_value *v) {
    return v && v->type == PJ_STRING ? v->string : NULL;
}
