// Reading and extending a serialized ONNX model (protobuf) without a protobuf library.
//
// The model computes how many frames each phoneme id lasts in its only Ceil node, but does not
// output it; and its noise (RandomNormalLike) is seeded from the clock. The copy given to ONNX
// Runtime, in memory (the user's file is not touched), has the Ceil's tensor as one more graph
// output and a fixed seed on every random node. A process that loads the voice and then forks a
// child per utterance (the engine host) or per item (render workers) starts every child from
// the same noise, so the same text gives the same samples.
#include "piper_internal.h"
#include <stdlib.h>
#include <string.h>

// Field numbers (onnx.proto): ModelProto.graph 7; GraphProto.node 1, .output 12;
// NodeProto.output 2, .op_type 4; ValueInfoProto.name 1, .type 2; TypeProto.tensor_type 1;
// TypeProto.Tensor.elem_type 1 (FLOAT = 1).
enum { MODEL_GRAPH = 7, GRAPH_NODE = 1, GRAPH_OUTPUT = 12, NODE_OUTPUT = 2, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5 };

typedef struct {
    const unsigned char *p, *end;
} cursor;

static int varint(cursor *c, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) return 0;
        unsigned char b = *c->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) { *out = v; return 1; }
    }
    return 0;
}

// Reads one field: its number and wire type; a length-delimited field's bytes in *body.
// Returns 0 at the end or on malformed input (*bad set).
static int field(cursor *c, uint32_t *number, cursor *body, int *bad) {
    if (c->p >= c->end) return 0;
    uint64_t key, n;
    if (!varint(c, &key)) { *bad = 1; return 0; }
    *number = (uint32_t)(key >> 3);
    body->p = body->end = NULL;
    switch (key & 7) {
    case 0: if (!varint(c, &n)) { *bad = 1; return 0; } break;
    case 1: if (c->end - c->p < 8) { *bad = 1; return 0; } c->p += 8; break;
    case 5: if (c->end - c->p < 4) { *bad = 1; return 0; } c->p += 4; break;
    case 2:
        if (!varint(c, &n) || n > (uint64_t)(c->end - c->p)) { *bad = 1; return 0; }
        body->p = c->p;
        body->end = c->p + n;
        c->p += n;
        break;
    default: *bad = 1; return 0;
    }
    return 1;
}

static int equals(cursor s, const char *text) {
    size_t n = strlen(text);
    return s.p && (size_t)(s.end - s.p) == n && memcmp(s.p, text, n) == 0;
}

int piper_find_ceil_output(const unsigned char *model, size_t length, char *name, size_t size) {
    cursor top = { model, model + length }, body;
    uint32_t number;
    int bad = 0, found = 0, graphs = 0;
    while (field(&top, &number, &body, &bad)) {
        if (number != MODEL_GRAPH || !body.p) continue;
        graphs++;
        cursor graph = body, node_body;
        while (field(&graph, &number, &node_body, &bad)) {
            if (number != GRAPH_NODE || !node_body.p) continue;
            cursor node = node_body, f;
            cursor first_output = { NULL, NULL };
            int is_ceil = 0;
            while (field(&node, &number, &f, &bad)) {
                if (number == NODE_OUTPUT && f.p && !first_output.p) first_output = f;
                if (number == NODE_OP_TYPE && equals(f, "Ceil")) is_ceil = 1;
            }
            if (bad) return -1;
            if (is_ceil && first_output.p) {
                found++;
                size_t n = (size_t)(first_output.end - first_output.p);
                if (n + 1 > size || n == 0) return 0;
                memcpy(name, first_output.p, n);
                name[n] = 0;
            }
        }
        if (bad) return -1;
    }
    if (bad || graphs == 0) return -1;
    return found == 1 ? 1 : 0;
}

static size_t put_varint(unsigned char *out, uint64_t v) {
    size_t n = 0;
    do {
        unsigned char b = v & 0x7F;
        v >>= 7;
        out[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

static int is_random(cursor node_body, int *has_seed) {
    cursor node = node_body, f;
    uint32_t number;
    int bad = 0, random = 0;
    *has_seed = 0;
    while (field(&node, &number, &f, &bad)) {
        if (number == NODE_OP_TYPE)
            random = equals(f, "RandomNormalLike") || equals(f, "RandomNormal") || equals(f, "RandomUniformLike") || equals(f, "RandomUniform");
        if (number == NODE_ATTRIBUTE && f.p) {
            cursor attribute = f, a;
            uint32_t n2;
            while (field(&attribute, &n2, &a, &bad))
                if (n2 == 1 && equals(a, "seed")) *has_seed = 1;
        }
    }
    return random && !bad;
}

unsigned char *piper_rewrite_model(const unsigned char *model, size_t length, const char *extra_output, float seed, size_t *out_length) {
    // The seed attribute: AttributeProto { name: "seed", f: seed, type: FLOAT }.
    unsigned char seed_attribute[16];
    size_t sa = 0;
    seed_attribute[sa++] = (NODE_ATTRIBUTE << 3) | 2;
    seed_attribute[sa++] = 14;  // name 6 bytes, f 5, type 3
    seed_attribute[sa++] = 0x0A; seed_attribute[sa++] = 4; memcpy(seed_attribute + sa, "seed", 4); sa += 4;
    seed_attribute[sa++] = 0x15; memcpy(seed_attribute + sa, &seed, 4); sa += 4;  // little-endian hosts only
    seed_attribute[sa++] = 0xA0; seed_attribute[sa++] = 0x01; seed_attribute[sa++] = 0x01;
    // The extra output: GraphProto.output { ValueInfoProto { name, type { tensor_type { elem_type: FLOAT } } } }.
    unsigned char output[4200];
    size_t o = 0;
    if (extra_output) {
        size_t n = strlen(extra_output);
        if (n > 4000) return NULL;
        unsigned char value_info[4100];
        size_t v = 0;
        value_info[v++] = 0x0A;
        v += put_varint(value_info + v, n);
        memcpy(value_info + v, extra_output, n);
        v += n;
        const unsigned char type[] = { 0x12, 4, 0x0A, 2, 0x08, 0x01 };
        memcpy(value_info + v, type, sizeof type);
        v += sizeof type;
        output[o++] = (GRAPH_OUTPUT << 3) | 2;
        o += put_varint(output + o, v);
        memcpy(output + o, value_info, v);
        o += v;
    }
    // At most: the model, a seed per node (each node's length may grow by a byte or two), the output.
    size_t nodes = 0;
    {
        cursor top = { model, model + length }, body;
        uint32_t number;
        int bad = 0;
        while (field(&top, &number, &body, &bad))
            if (number == MODEL_GRAPH && body.p) {
                cursor graph = body, nb;
                while (field(&graph, &number, &nb, &bad)) nodes += number == GRAPH_NODE;
            }
        if (bad) return NULL;
    }
    size_t capacity = length + nodes * (sizeof seed_attribute + 12) + o + 64;
    unsigned char *out = malloc(capacity);
    if (!out) return NULL;
    size_t w = 0;
    cursor top = { model, model + length }, body;
    uint32_t number;
    int bad = 0, graphs = 0;
    const unsigned char *field_start = top.p;
    while (field(&top, &number, &body, &bad)) {
        if (number != MODEL_GRAPH || !body.p || graphs++ > 0) {
            memcpy(out + w, field_start, (size_t)(top.p - field_start));
            w += (size_t)(top.p - field_start);
            field_start = top.p;
            continue;
        }
        // The graph, rebuilt into a buffer of its own, then written with its new length.
        size_t graph_capacity = (size_t)(body.end - body.p) + nodes * (sizeof seed_attribute + 12) + o;
        unsigned char *g = malloc(graph_capacity);
        if (!g) { free(out); return NULL; }
        size_t gw = 0;
        cursor graph = body, nb;
        const unsigned char *graph_field = graph.p;
        while (field(&graph, &number, &nb, &bad)) {
            int has_seed = 0;
            if (number == GRAPH_NODE && nb.p && is_random(nb, &has_seed) && !has_seed) {
                size_t n = (size_t)(nb.end - nb.p) + sa;
                g[gw++] = (GRAPH_NODE << 3) | 2;
                gw += put_varint(g + gw, n);
                memcpy(g + gw, nb.p, (size_t)(nb.end - nb.p));
                gw += (size_t)(nb.end - nb.p);
                memcpy(g + gw, seed_attribute, sa);
                gw += sa;
            } else {
                memcpy(g + gw, graph_field, (size_t)(graph.p - graph_field));
                gw += (size_t)(graph.p - graph_field);
            }
            graph_field = graph.p;
        }
        memcpy(g + gw, output, o);
        gw += o;
        out[w++] = (MODEL_GRAPH << 3) | 2;
        w += put_varint(out + w, gw);
        memcpy(out + w, g, gw);
        w += gw;
        free(g);
        field_start = top.p;
    }
    if (bad || graphs == 0) { free(out); return NULL; }
    *out_length = w;
    return out;
}
