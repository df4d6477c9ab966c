// Reading and extending a serialized ONNX model (protobuf) without a protobuf library.
//
// The model computes how many frames each phoneme id lasts in its only Ceil node, but does not
// output it; and its noise (RandomNormalLike) is seeded from the clock. The copy given to ONNX
// Runtime, in memory (the user's file is not touched), has the Ceil's tensor as one more graph
// output and a fixed seed on every random node. A process that loads the voice and then forks a
// child per utterance (the engine host) or per item (render workers) starts every child from
// the same noise, so the same text gives the same samples.
#include "piper_internal.h"
#include <math.h>
#include <stdio.h>
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

// MARK: Writing

static size_t put_field(unsigned char *out, uint32_t number, const void *body, size_t n) {
    size_t w = put_varint(out, (uint64_t)number << 3 | 2);
    w += put_varint(out + w, n);
    memcpy(out + w, body, n);
    return w + n;
}

// A ValueInfoProto field (graph input or output) naming a float tensor of any shape:
// { name, type { tensor_type { elem_type: FLOAT } } }. 0 if the name is too long.
static size_t put_float_value(unsigned char *out, uint32_t number, const unsigned char *name, size_t n) {
    unsigned char info[4200];
    if (n > 4000) return 0;
    size_t v = put_field(info, 1, name, n);
    const unsigned char type[] = { 0x12, 4, 0x0A, 2, 0x08, 0x01 };
    memcpy(info + v, type, sizeof type);
    v += sizeof type;
    return put_field(out, number, info, v);
}

// The seed attribute: AttributeProto { name: "seed", f: seed, type: FLOAT } (little-endian hosts).
enum { SEED_ATTRIBUTE_LENGTH = 16 };
static size_t seed_attribute_bytes(unsigned char out[SEED_ATTRIBUTE_LENGTH], float seed) {
    size_t sa = 0;
    out[sa++] = (NODE_ATTRIBUTE << 3) | 2;
    out[sa++] = 14;  // name 6 bytes, f 5, type 3
    out[sa++] = 0x0A; out[sa++] = 4; memcpy(out + sa, "seed", 4); sa += 4;
    out[sa++] = 0x15; memcpy(out + sa, &seed, 4); sa += 4;
    out[sa++] = 0xA0; out[sa++] = 0x01; out[sa++] = 0x01;
    return sa;
}

// A graph's node field: as it was, or with `seed_attribute` appended if it is a random node
// without a seed. `field_bytes` is the whole field, `node` its body.
static size_t put_node(unsigned char *out, cursor field_bytes, cursor node, const unsigned char *seed_attribute, size_t sa) {
    int has_seed = 0;
    if (!is_random(node, &has_seed) || has_seed) {
        memcpy(out, field_bytes.p, (size_t)(field_bytes.end - field_bytes.p));
        return (size_t)(field_bytes.end - field_bytes.p);
    }
    size_t len = (size_t)(node.end - node.p), w = 0;
    w += put_varint(out + w, (GRAPH_NODE << 3) | 2);
    w += put_varint(out + w, len + sa);
    memcpy(out + w, node.p, len);
    memcpy(out + w + len, seed_attribute, sa);
    return w + len + sa;
}

// How many node fields the model's graphs hold; -1 if malformed.
static long count_nodes(const unsigned char *model, size_t length) {
    cursor top = { model, model + length }, body;
    uint32_t number;
    int bad = 0;
    long nodes = 0;
    while (field(&top, &number, &body, &bad))
        if (number == MODEL_GRAPH && body.p) {
            cursor graph = body, nb;
            while (field(&graph, &number, &nb, &bad)) nodes += number == GRAPH_NODE;
        }
    return bad ? -1 : nodes;
}

// The model with its first graph replaced by `graph` (malloc'd); NULL if it has none or is
// malformed.
static unsigned char *with_graph(const unsigned char *model, size_t length, const unsigned char *graph, size_t graph_length,
                                 size_t *out_length) {
    unsigned char *out = malloc(graph_length + length + 32);
    if (!out) return NULL;
    size_t w = 0;
    cursor top = { model, model + length }, body;
    uint32_t number;
    int bad = 0, graphs = 0;
    const unsigned char *start = top.p;
    while (field(&top, &number, &body, &bad)) {
        if (number == MODEL_GRAPH && body.p && graphs++ == 0) {
            w += put_field(out + w, MODEL_GRAPH, graph, graph_length);
        } else {
            // Within the allocation: the other fields are part of the model's `length` bytes.
            memcpy(out + w, start, (size_t)(top.p - start));
            w += (size_t)(top.p - start);
        }
        start = top.p;
    }
    if (bad || graphs == 0) { free(out); return NULL; }
    *out_length = w;
    return out;
}

unsigned char *piper_rewrite_model(const unsigned char *model, size_t length, const char *extra_output, float seed, size_t *out_length) {
    unsigned char seed_attribute[SEED_ATTRIBUTE_LENGTH];
    size_t sa = seed_attribute_bytes(seed_attribute, seed);
    long nodes = count_nodes(model, length);
    if (nodes < 0 || (extra_output && strlen(extra_output) > 4000)) return NULL;
    // The first graph, rebuilt: random nodes seeded, and the extra output after the others.
    cursor top = { model, model + length }, body, graph_body = { NULL, NULL };
    uint32_t number;
    int bad = 0;
    while (field(&top, &number, &body, &bad))
        if (number == MODEL_GRAPH && body.p && !graph_body.p) graph_body = body;
    if (bad || !graph_body.p) return NULL;
    size_t capacity = (size_t)(graph_body.end - graph_body.p) + (size_t)nodes * (sa + 12) + 4300;
    unsigned char *g = malloc(capacity);
    if (!g) return NULL;
    size_t gw = 0;
    cursor graph = graph_body, nb;
    const unsigned char *graph_field = graph.p;
    while (field(&graph, &number, &nb, &bad)) {
        cursor whole = { graph_field, graph.p };
        if (number == GRAPH_NODE && nb.p) {
            gw += put_node(g + gw, whole, nb, seed_attribute, sa);
        } else {
            memcpy(g + gw, whole.p, (size_t)(whole.end - whole.p));
            gw += (size_t)(whole.end - whole.p);
        }
        graph_field = graph.p;
    }
    if (extra_output) gw += put_float_value(g + gw, GRAPH_OUTPUT, (const unsigned char *)extra_output, strlen(extra_output));
    unsigned char *out = bad ? NULL : with_graph(model, length, g, gw, out_length);
    free(g);
    return out;
}

// MARK: Splitting the model at its decoder
//
// A Piper voice is one graph: a text encoder, the phoneme durations (the Ceil), the noise and
// the flow, which give the latent frames [1, C, T]; then the decoder (HiFi-GAN, the nodes under
// /dec/), which turns each frame into 256 samples. The decoder is convolutional and sees a few
// frames either side, so a stretch of frames decoded with enough frames of context around it
// gives the same samples as the whole sentence decoded at once: the latent can be decoded a
// chunk at a time, and the first chunk played while the next is decoded.
//
// The split is found by name: the decoder's first node is /dec/conv_pre/Conv (every voice that
// piper_train exports), and its first input is the latent. The decoder is every node that the
// output "output" needs, going back no further than the latent; the encoder every node that the
// latent and the durations need. A voice whose graph does not split that way (no such node, a
// decoder that reads the text or makes noise, subgraphs) is spoken whole, as before.
//
// The flow is split off too, where it can be (see flow_inputs): it works frame by frame, with
// a few frames of context, but costs as much per frame as the text's encoder does per phoneme
// id, so with it in the encoder a long sentence's first sound waited for its whole flow (joe,
// 300 ids: 59 ms of encoder, 81 ms of flow). Then the encoder gives the flow's inputs, the
// flow part turns a chunk of them into a chunk of the latent, and only the text's encoder and
// the durations precede the first chunk.

enum { GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_VALUE_INFO = 13, NODE_INPUT = 1, NODE_NAME = 3, TENSOR_NAME = 8,
       ATTRIBUTE_GRAPH = 6, ATTRIBUTE_GRAPHS = 11 };

typedef struct {
    const unsigned char *p;
    size_t n;
} text;

static text text_of(cursor c) { return (text){ c.p, c.p ? (size_t)(c.end - c.p) : 0 }; }
static int text_is(text t, const char *s) { return t.n == strlen(s) && memcmp(t.p, s, t.n) == 0; }

// A hash map from tensor names to an int (a node's index, or 1 for "present").
typedef struct {
    text *keys;
    int *values;
    size_t capacity;
} name_map;

static uint64_t name_hash(text t) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < t.n; i++) h = (h ^ t.p[i]) * 1099511628211ull;
    return h;
}

static int map_init(name_map *m, size_t expected) {
    m->capacity = 16;
    while (m->capacity < expected * 2 + 16) m->capacity *= 2;
    m->keys = calloc(m->capacity, sizeof *m->keys);
    m->values = calloc(m->capacity, sizeof *m->values);
    return m->keys && m->values;
}

static void map_free(name_map *m) {
    free(m->keys);
    free(m->values);
}

// The slot of `t`: where it is, or the empty one where it would go.
static size_t map_slot(const name_map *m, text t) {
    size_t i = name_hash(t) & (m->capacity - 1);
    while (m->keys[i].p && !(m->keys[i].n == t.n && memcmp(m->keys[i].p, t.p, t.n) == 0)) i = (i + 1) & (m->capacity - 1);
    return i;
}

// Returns 0 when full (the caller sized it).
static int map_put(name_map *m, text t, int value) {
    size_t i = map_slot(m, t);
    if (!m->keys[i].p) {
        m->keys[i] = t;
    }
    m->values[i] = value;
    return 1;
}

static int map_get(const name_map *m, text t, int *value) {
    if (!t.p) return 0;
    size_t i = map_slot(m, t);
    if (!m->keys[i].p) return 0;
    if (value) *value = m->values[i];
    return 1;
}

typedef struct {
    cursor field;   // the whole field in the graph: key, length and body
    cursor body;    // the NodeProto
    size_t first_input, inputs, first_output, outputs;  // into the graph's name list
    int subgraph;   // has an attribute holding a graph
    int random;     // a random node
} split_node;

typedef struct {
    split_node *nodes;
    size_t node_count;
    text *names;    // every node's inputs and outputs, in order
    size_t name_count;
    cursor *fields; // every field of the graph, in order (nodes included)
    uint32_t *numbers;
    size_t field_count;
    name_map producer, initializers, inputs;
} split_graph;

static void split_graph_free(split_graph *g) {
    free(g->nodes);
    free(g->names);
    free(g->fields);
    free(g->numbers);
    map_free(&g->producer);
    map_free(&g->initializers);
    map_free(&g->inputs);
}

// The name inside a ValueInfoProto (field 1) or a TensorProto (field 8).
static text inner_name(cursor body, uint32_t wanted) {
    cursor c = body, f;
    uint32_t number;
    int bad = 0;
    while (field(&c, &number, &f, &bad))
        if (number == wanted && f.p) return text_of(f);
    return (text){ NULL, 0 };
}

// Reads the graph's fields and nodes. 0 on malformed input.
static int split_graph_read(cursor graph_body, split_graph *g) {
    memset(g, 0, sizeof *g);
    size_t fields = 0, names = 0;
    {
        cursor c = graph_body, f;
        uint32_t number;
        int bad = 0;
        while (field(&c, &number, &f, &bad)) {
            fields++;
            if (number == GRAPH_NODE && f.p) {
                cursor n = f, a;
                uint32_t k;
                while (field(&n, &k, &a, &bad)) names += (k == NODE_INPUT || k == NODE_OUTPUT);
            }
        }
        if (bad) return 0;
    }
    g->fields = calloc(fields + 1, sizeof *g->fields);
    g->numbers = calloc(fields + 1, sizeof *g->numbers);
    g->nodes = calloc(fields + 1, sizeof *g->nodes);
    g->names = calloc(names + 1, sizeof *g->names);
    if (!g->fields || !g->numbers || !g->nodes || !g->names || !map_init(&g->producer, names) || !map_init(&g->initializers, fields) ||
        !map_init(&g->inputs, fields))
        return 0;
    cursor c = graph_body, f;
    uint32_t number;
    int bad = 0;
    const unsigned char *start = c.p;
    while (field(&c, &number, &f, &bad)) {
        g->fields[g->field_count] = (cursor){ start, c.p };
        g->numbers[g->field_count++] = number;
        start = c.p;
        if (number == GRAPH_INITIALIZER && f.p) {
            text name = inner_name(f, TENSOR_NAME);
            if (name.p) map_put(&g->initializers, name, 1);
        } else if (number == GRAPH_INPUT && f.p) {
            text name = inner_name(f, 1);
            if (name.p) map_put(&g->inputs, name, 1);
        } else if (number == GRAPH_NODE && f.p) {
            split_node *node = &g->nodes[g->node_count];
            node->field = g->fields[g->field_count - 1];
            node->body = f;
            int has_seed = 0;
            node->random = is_random(f, &has_seed);
            node->first_input = g->name_count;
            cursor n = f, a;
            uint32_t k;
            while (field(&n, &k, &a, &bad)) {
                if (k == NODE_INPUT) g->names[g->name_count++] = text_of(a), node->inputs++;
                if (k == NODE_ATTRIBUTE && a.p) {
                    cursor at = a, x;
                    uint32_t k2;
                    while (field(&at, &k2, &x, &bad)) node->subgraph |= (k2 == ATTRIBUTE_GRAPH || k2 == ATTRIBUTE_GRAPHS);
                }
            }
            node->first_output = g->name_count;
            n = f;
            while (field(&n, &k, &a, &bad)) {
                if (k == NODE_OUTPUT) {
                    text out = text_of(a);
                    g->names[g->name_count++] = out;
                    node->outputs++;
                    if (out.n) map_put(&g->producer, out, (int)g->node_count);
                }
            }
            g->node_count++;
        }
    }
    return !bad;
}

// Marks (in `keep`) every node that the tensors `wanted` need, going back no further than the
// tensors `stop`; `used` gets the initializers they read. Returns 0 if out of memory;
// *reads_input is set to a graph input they read (other than an initializer), if any.
static int reach(const split_graph *g, const text *wanted, size_t wanted_count, const text *stop, size_t stop_count, char *keep, name_map *used,
                 text *reads_input, text allowed_input) {
    size_t capacity = g->name_count + wanted_count + 1, top = 0;
    text *stack = malloc(capacity * sizeof *stack);
    name_map seen;
    if (!stack || !map_init(&seen, capacity)) { free(stack); return 0; }
    for (size_t i = 0; i < wanted_count; i++) stack[top++] = wanted[i];
    while (top) {
        text t = stack[--top];
        if (!t.n || map_get(&seen, t, NULL)) continue;
        map_put(&seen, t, 1);
        int stopped = 0;
        for (size_t i = 0; i < stop_count && !stopped; i++) stopped = stop[i].p && t.n == stop[i].n && memcmp(t.p, stop[i].p, t.n) == 0;
        if (stopped) continue;
        if (map_get(&g->initializers, t, NULL)) { map_put(used, t, 1); continue; }
        int producer;
        if (map_get(&g->producer, t, &producer)) {
            if (keep[producer]) continue;
            keep[producer] = 1;
            const split_node *n = &g->nodes[producer];
            for (size_t i = 0; i < n->inputs && top < capacity; i++) stack[top++] = g->names[n->first_input + i];
            continue;
        }
        if (map_get(&g->inputs, t, NULL) && !(allowed_input.p && t.n == allowed_input.n && memcmp(t.p, allowed_input.p, t.n) == 0) &&
            reads_input && !reads_input->p)
            *reads_input = t;
    }
    free(stack);
    map_free(&seen);
    return 1;
}

// Writes one part: the model's fields but its graph, then the graph with the nodes in `keep`,
// the initializers in `used`, the inputs in `inputs` (NULL: all but unused initializers) and
// then `extra_inputs` and `outputs` (float values) or the original output named `output`.
static unsigned char *write_part(const unsigned char *model, size_t length, const split_graph *g, const char *keep, const name_map *used,
                                 const text *extra_inputs, size_t extra_input_count, const text *outputs, size_t output_count,
                                 text original_output, float seed, size_t *out_length) {
    unsigned char seed_attribute[SEED_ATTRIBUTE_LENGTH];
    size_t sa = seed_attribute_bytes(seed_attribute, seed);
    size_t graph_capacity = length + g->node_count * (sa + 12) + (extra_input_count + output_count) * 4300 + 64;
    unsigned char *graph = malloc(graph_capacity);
    if (!graph) return NULL;
    size_t gw = 0, node = 0;
    for (size_t i = 0; i < g->field_count; i++) {
        cursor f = g->fields[i];
        uint32_t number = g->numbers[i];
        // The body of the field, for the kinds that are filtered.
        cursor c = f, body;
        uint32_t n2;
        int bad = 0;
        field(&c, &n2, &body, &bad);
        if (number == GRAPH_NODE && body.p) {
            if (keep[node++]) gw += put_node(graph + gw, f, body, seed_attribute, sa);
            continue;
        } else if (number == GRAPH_INITIALIZER && body.p) {
            if (!map_get(used, inner_name(body, TENSOR_NAME), NULL)) continue;
        } else if (number == GRAPH_INPUT && body.p) {
            // An initializer listed as an input stays if it is used; the encoder keeps the model's
            // inputs, the decoder only "sid", if it reads it (marked used).
            text name = inner_name(body, 1);
            int kept = map_get(&g->initializers, name, NULL) || extra_input_count > 0 ? map_get(used, name, NULL) : 1;
            if (!kept) continue;
        } else if (number == GRAPH_OUTPUT && body.p) {
            if (!original_output.p || !(inner_name(body, 1).n == original_output.n && memcmp(inner_name(body, 1).p, original_output.p, original_output.n) == 0))
                continue;
        } else if (number == GRAPH_VALUE_INFO) {
            continue;  // shapes of inner tensors: optional, and many name tensors that are gone
        }
        memcpy(graph + gw, f.p, (size_t)(f.end - f.p));
        gw += (size_t)(f.end - f.p);
    }
    for (size_t i = 0; i < extra_input_count; i++) gw += put_float_value(graph + gw, GRAPH_INPUT, extra_inputs[i].p, extra_inputs[i].n);
    for (size_t i = 0; i < output_count; i++) gw += put_float_value(graph + gw, GRAPH_OUTPUT, outputs[i].p, outputs[i].n);
    unsigned char *out = with_graph(model, length, graph, gw, out_length);
    free(graph);
    return out;
}

// Whether the nodes in `keep` read the speaker id.
static int reads_speaker(const split_graph *g, const char *keep) {
    for (size_t i = 0; i < g->node_count; i++) {
        if (!keep[i]) continue;
        for (size_t k = 0; k < g->nodes[i].inputs; k++)
            if (text_is(g->names[g->nodes[i].first_input + k], "sid")) return 1;
    }
    return 0;
}

// The flow's inputs, in `out` (1 or 2 of them: the prior's sample and the frames' mask), or 0
// if the flow does not split off. The flow is the nodes that both come from a node named /flow/
// (through any nodes) and lead to the latent; its inputs are what those read from nodes before
// it that depend on the text (not constants, nor the speaker's embedding, which the flow part
// computes itself). Not split off: no /flow/ node, more than two such inputs, or a flow that
// reads the text or makes noise.
static size_t flow_inputs(const split_graph *g, text latent, text out[2]) {
    size_t n = g->node_count, found = 0;
    char *from_flow = calloc(n + 1, 1), *to_latent = calloc(n + 1, 1), *depends = calloc(n + 1, 1);
    name_map unused = { 0 };
    text none = { NULL, 0 };
    if (!from_flow || !to_latent || !depends || !map_init(&unused, g->name_count) ||
        !reach(g, &latent, 1, NULL, 0, to_latent, &unused, NULL, none))
        goto done;
    // Nodes are in order in a valid model, but not necessarily here: passes until nothing changes.
    for (int pass = 0, changed = 1; changed; pass++) {
        if (pass == 64) goto done;
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            const split_node *node = &g->nodes[i];
            int flow = from_flow[i], dep = depends[i];
            text name = inner_name(node->body, NODE_NAME);
            if (!flow && name.n > 6 && memcmp(name.p, "/flow/", 6) == 0) flow = 1;
            for (size_t k = 0; k < node->inputs && (!flow || !dep); k++) {
                text t = g->names[node->first_input + k];
                int p;
                if (map_get(&g->producer, t, &p)) {
                    flow |= from_flow[p];
                    dep |= depends[p];
                } else if (map_get(&g->inputs, t, NULL) && !map_get(&g->initializers, t, NULL) && !text_is(t, "sid")) {
                    dep = 1;
                }
            }
            if (flow != from_flow[i] || dep != depends[i]) changed = 1;
            from_flow[i] = (char)flow;
            depends[i] = (char)dep;
        }
    }
    int last;
    if (!map_get(&g->producer, latent, &last) || !from_flow[last]) goto done;
    for (size_t i = 0; i < n; i++) {
        if (!from_flow[i] || !to_latent[i]) continue;
        const split_node *node = &g->nodes[i];
        if (node->random) { found = 0; goto done; }
        for (size_t k = 0; k < node->inputs; k++) {
            text t = g->names[node->first_input + k];
            int p;
            if (!map_get(&g->producer, t, &p)) {
                if (map_get(&g->inputs, t, NULL) && !map_get(&g->initializers, t, NULL) && !text_is(t, "sid")) { found = 0; goto done; }
                continue;
            }
            if ((from_flow[p] && to_latent[p]) || !depends[p]) continue;
            int known = 0;
            for (size_t j = 0; j < found; j++) known |= out[j].n == t.n && memcmp(out[j].p, t.p, t.n) == 0;
            if (known) continue;
            if (found == 2) { found = 0; goto done; }
            out[found++] = t;
        }
    }
done:
    free(from_flow);
    free(to_latent);
    free(depends);
    map_free(&unused);
    return found;
}

int piper_split_model(const unsigned char *model, size_t length, const char *durations, float seed, piper_split *split, char *why,
                      size_t why_size) {
    if (split) memset(split, 0, sizeof *split);
    // The model as a whole must read, every graph and node of it, as it must for the voice to load.
    char ceil_name[512];
    if (piper_find_ceil_output(model, length, ceil_name, sizeof ceil_name) < 0) return -1;
    cursor top = { model, model + length }, body, graph_body = { NULL, NULL };
    uint32_t number;
    int bad = 0;
    while (field(&top, &number, &body, &bad))
        if (number == MODEL_GRAPH && body.p && !graph_body.p) graph_body = body;
    if (bad || !graph_body.p) return -1;
    split_graph g;
    int result = 0;
    char *keep_encoder = NULL, *keep_decoder = NULL, *keep_flow = NULL;
    name_map encoder_used = { 0 }, decoder_used = { 0 }, flow_used = { 0 };
    if (!split_graph_read(graph_body, &g)) { split_graph_free(&g); return -1; }
    text latent = { NULL, 0 }, output = { (const unsigned char *)"output", 6 }, none = { NULL, 0 };
    text sid = { (const unsigned char *)"sid", 3 };
    for (size_t i = 0; i < g.node_count && !latent.p; i++) {
        if (text_is(inner_name(g.nodes[i].body, NODE_NAME), "/dec/conv_pre/Conv") && g.nodes[i].inputs > 0)
            latent = g.names[g.nodes[i].first_input];
    }
    int producer = -1;
    keep_encoder = calloc(g.node_count + 1, 1);
    keep_decoder = calloc(g.node_count + 1, 1);
    if (!keep_encoder || !keep_decoder || !map_init(&encoder_used, g.name_count) || !map_init(&decoder_used, g.name_count)) {
        snprintf(why, why_size, "out of memory");
        goto done;
    }
    if (!latent.p || !latent.n || latent.n >= sizeof ((piper_split *)0)->latent) {
        snprintf(why, why_size, "it has no decoder node /dec/conv_pre/Conv");
        goto done;
    }
    if (!map_get(&g.producer, latent, &producer) || !map_get(&g.producer, output, NULL)) {
        snprintf(why, why_size, "its decoder's input or its output \"output\" is not made by a node");
        goto done;
    }
    for (size_t i = 0; i < g.node_count; i++)
        if (g.nodes[i].subgraph) {
            snprintf(why, why_size, "it has nodes holding subgraphs");
            goto done;
        }
    text reads = { NULL, 0 };
    if (!reach(&g, &output, 1, &latent, 1, keep_decoder, &decoder_used, &reads, sid)) { snprintf(why, why_size, "out of memory"); goto done; }
    if (reads.p) {
        snprintf(why, why_size, "its decoder reads the model's input %.*s", (int)(reads.n < 100 ? reads.n : 100), (const char *)reads.p);
        goto done;
    }
    for (size_t i = 0; i < g.node_count; i++)
        if (keep_decoder[i] && g.nodes[i].random) {
            snprintf(why, why_size, "its decoder makes noise");
            goto done;
        }
    // The flow, split off where it can be (with the durations known: they are the encoder's
    // second output, and the flow's second input its third).
    text flow_in[2] = { { NULL, 0 }, { NULL, 0 } };
    size_t flow_count = durations ? flow_inputs(&g, latent, flow_in) : 0;
    if (flow_count) {
        keep_flow = calloc(g.node_count + 1, 1);
        if (!keep_flow || !map_init(&flow_used, g.name_count)) { snprintf(why, why_size, "out of memory"); goto done; }
        text flow_reads = { NULL, 0 };
        if (!reach(&g, &latent, 1, flow_in, flow_count, keep_flow, &flow_used, &flow_reads, sid)) { snprintf(why, why_size, "out of memory"); goto done; }
        for (size_t i = 0; i < g.node_count && !flow_reads.p; i++)
            if (keep_flow[i] && g.nodes[i].random) flow_reads = latent;
        if (flow_reads.p) flow_count = 0;  // it reads the text after all, or makes noise: kept in the encoder
    }
    text durations_text = { (const unsigned char *)durations, durations ? strlen(durations) : 0 };
    text wanted[3] = { latent, durations_text, { NULL, 0 } };
    size_t wanted_count = durations ? 2 : 1;
    if (flow_count) {
        wanted[0] = flow_in[0];
        if (flow_count == 2) wanted[2] = flow_in[1], wanted_count = 3;
    }
    if (!reach(&g, wanted, wanted_count, NULL, 0, keep_encoder, &encoder_used, NULL, none)) { snprintf(why, why_size, "out of memory"); goto done; }
    int decoder_takes_speaker = reads_speaker(&g, keep_decoder);
    if (decoder_takes_speaker) map_put(&decoder_used, sid, 1);  // kept among the decoder's inputs
    if (flow_count && reads_speaker(&g, keep_flow)) map_put(&flow_used, sid, 1);
    if (!split) {  // only asked whether it splits
        result = 1;
        goto done;
    }
    split->encoder = write_part(model, length, &g, keep_encoder, &encoder_used, NULL, 0, wanted, wanted_count, none, seed, &split->encoder_length);
    split->decoder = write_part(model, length, &g, keep_decoder, &decoder_used, &latent, 1, NULL, 0, output, seed, &split->decoder_length);
    if (flow_count) split->flow = write_part(model, length, &g, keep_flow, &flow_used, flow_in, flow_count, &latent, 1, none, seed, &split->flow_length);
    if (!split->encoder || !split->decoder || (flow_count && !split->flow)) {
        free(split->encoder);
        free(split->decoder);
        free(split->flow);
        split->encoder = split->decoder = split->flow = NULL;
        snprintf(why, why_size, "out of memory");
        goto done;
    }
    memcpy(split->latent, latent.p, latent.n);
    split->latent[latent.n] = 0;
    split->decoder_takes_speaker = decoder_takes_speaker;
    result = 1;
done:
    free(keep_encoder);
    free(keep_decoder);
    free(keep_flow);
    map_free(&encoder_used);
    map_free(&decoder_used);
    map_free(&flow_used);
    split_graph_free(&g);
    return result;
}

// MARK: The decoder on planes
//
// The decoder's convolutions are one-dimensional ([1, C, T] tensors), and ONNX Runtime runs a
// 1-D Conv as an unfolding of its input and a matrix product. The same convolution written in
// two dimensions over [1, C, 1, T] (kernel 1 × k) is the same arithmetic, but ONNX Runtime's
// layout pass then runs it on its blocked channels layout (NCHWc) with direct kernels: joe's
// decoder on 288 frames, one thread: 160 against 129 ms, samples within 1e-7 (−115 dB).
// So the decoder part is rewritten: every Conv and ConvTranspose under /dec/ gets a 1 × k
// kernel (its weight [O, I, k] becomes [O, I, 1, k], its attributes gain a leading axis), each
// tensor entering those nodes from outside gets an Unsqueeze at axis 2, and each leaving them a
// Squeeze. Only a decoder whose /dec/ nodes are all convolutions and element-wise operations
// with scalar constants is rewritten; any other stays as it was.

enum { MODEL_OPSET = 8, OPSET_DOMAIN = 1, OPSET_VERSION = 2, TENSOR_DIMS = 1, ATTR_NAME = 1, ATTR_INTS = 8, ATTR_TENSOR = 5 };

static int skip_value(cursor *c, int wire) {
    uint64_t v;
    switch (wire) {
    case 0: return varint(c, &v);
    case 1: if (c->end - c->p < 8) return 0; c->p += 8; return 1;
    case 5: if (c->end - c->p < 4) return 0; c->p += 4; return 1;
    case 2:
        if (!varint(c, &v) || v > (uint64_t)(c->end - c->p)) return 0;
        c->p += v;
        return 1;
    default: return 0;
    }
}

// The repeated int64 field `wanted` of a message, packed or not; its count, or -1 if malformed
// or more than `max`.
static long read_ints(cursor body, uint32_t wanted, int64_t *out, size_t max) {
    cursor c = body;
    size_t n = 0;
    while (c.p < c.end) {
        uint64_t key, v;
        if (!varint(&c, &key)) return -1;
        int wire = (int)(key & 7);
        if ((key >> 3) == wanted && wire == 0) {
            if (!varint(&c, &v) || n == max) return -1;
            out[n++] = (int64_t)v;
        } else if ((key >> 3) == wanted && wire == 2) {
            if (!varint(&c, &v) || v > (uint64_t)(c.end - c.p)) return -1;
            cursor packed = { c.p, c.p + v };
            c.p += v;
            while (packed.p < packed.end) {
                if (!varint(&packed, &v) || n == max) return -1;
                out[n++] = (int64_t)v;
            }
        } else if (!skip_value(&c, wire)) {
            return -1;
        }
    }
    return (long)n;
}

// A message's bytes without its fields numbered `dropped`; the length written.
static size_t copy_without(unsigned char *out, cursor body, uint32_t dropped) {
    cursor c = body, f;
    uint32_t number;
    int bad = 0;
    size_t w = 0;
    for (const unsigned char *start = c.p; field(&c, &number, &f, &bad); start = c.p) {
        if (number == dropped) continue;
        memcpy(out + w, start, (size_t)(c.p - start));
        w += (size_t)(c.p - start);
    }
    return w;
}

static size_t put_ints(unsigned char *out, uint32_t number, const int64_t *values, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        w += put_varint(out + w, (uint64_t)number << 3);
        w += put_varint(out + w, (uint64_t)values[i]);
    }
    return w;
}

// Whether a TensorProto holds at most one element (a scalar, or dims all 1).
static int tensor_is_scalar(cursor tensor) {
    int64_t dims[8];
    long n = read_ints(tensor, TENSOR_DIMS, dims, 8);
    if (n < 0) return 0;
    for (long i = 0; i < n; i++)
        if (dims[i] != 1) return 0;
    return 1;
}

// The TensorProto of the initializer named `name`, or of the value of the Constant node making
// it; {NULL} if neither.
static cursor constant_tensor(const split_graph *g, text name) {
    for (size_t i = 0; i < g->field_count; i++) {
        if (g->numbers[i] != GRAPH_INITIALIZER) continue;
        cursor c = g->fields[i], body;
        uint32_t n;
        int bad = 0;
        if (field(&c, &n, &body, &bad) && body.p) {
            text t = inner_name(body, TENSOR_NAME);
            if (t.p && t.n == name.n && memcmp(t.p, name.p, t.n) == 0) return body;
        }
    }
    int producer;
    if (map_get(&g->producer, name, &producer)) {
        const split_node *node = &g->nodes[producer];
        text op = inner_name(node->body, NODE_OP_TYPE);
        if (!text_is(op, "Constant")) return (cursor){ NULL, NULL };
        cursor c = node->body, a;
        uint32_t k;
        int bad = 0;
        while (field(&c, &k, &a, &bad)) {
            if (k != NODE_ATTRIBUTE || !a.p || !text_is(inner_name(a, ATTR_NAME), "value")) continue;
            cursor at = a, t;
            uint32_t k2;
            while (field(&at, &k2, &t, &bad))
                if (k2 == ATTR_TENSOR && t.p) return t;
        }
    }
    return (cursor){ NULL, NULL };
}

typedef enum { PLANE_OTHER, PLANE_CONV, PLANE_ELEMENTWISE, PLANE_CONSTANT } plane_kind;

static plane_kind plane_kind_of(text op) {
    if (text_is(op, "Conv") || text_is(op, "ConvTranspose")) return PLANE_CONV;
    const char *elementwise[] = { "Add", "Sub", "Mul", "Div", "LeakyRelu", "Relu", "Tanh", "Identity" };
    for (size_t i = 0; i < sizeof elementwise / sizeof *elementwise; i++)
        if (text_is(op, elementwise[i])) return PLANE_ELEMENTWISE;
    return text_is(op, "Constant") ? PLANE_CONSTANT : PLANE_OTHER;
}

// A Conv's attribute with a leading axis: kernel_shape, strides and dilations [k] -> [1, k],
// pads [a, b] -> [0, a, 0, b], output_padding [o] -> [0, o]; others as they are. 0 if it
// cannot be (more than one axis, or output_shape).
static size_t put_planar_attribute(unsigned char *out, cursor attribute) {
    text name = inner_name(attribute, ATTR_NAME);
    int64_t v[4];
    long n = read_ints(attribute, ATTR_INTS, v, 4);
    int64_t planar[4];
    size_t count = 0;
    if (text_is(name, "kernel_shape") || text_is(name, "strides") || text_is(name, "dilations") || text_is(name, "output_padding")) {
        if (n != 1) return 0;
        planar[0] = text_is(name, "output_padding") ? 0 : 1, planar[1] = v[0], count = 2;
    } else if (text_is(name, "pads")) {
        if (n != 2) return 0;
        planar[0] = 0, planar[1] = v[0], planar[2] = 0, planar[3] = v[1], count = 4;
    } else if (text_is(name, "output_shape")) {
        return 0;
    } else {
        return put_field(out, NODE_ATTRIBUTE, attribute.p, (size_t)(attribute.end - attribute.p));
    }
    unsigned char body[256];
    if ((size_t)(attribute.end - attribute.p) > 150) return 0;
    size_t w = copy_without(body, attribute, ATTR_INTS);
    w += put_ints(body + w, ATTR_INTS, planar, count);
    return put_field(out, NODE_ATTRIBUTE, body, w);
}

static const char PLANAR_SUFFIX[] = "/parla_planar", LINEAR_SUFFIX[] = "/parla_linear", AXES_NAME[] = "parla_axis_2";

// A NodeProto { input: from[, AXES_NAME], output: to, op_type: op[, attribute axes = [2]] }.
static size_t put_reshape_node(unsigned char *out, text from, const char *from_suffix, text to, const char *to_suffix, const char *op,
                               int axes_as_input) {
    unsigned char *body = malloc(from.n + to.n + 128);
    if (!body) return 0;
    size_t w = 0;
    unsigned char name[4200];
    if (from.n > 4000 || to.n > 4000) { free(body); return 0; }
    memcpy(name, from.p, from.n), memcpy(name + from.n, from_suffix, strlen(from_suffix));
    w += put_field(body + w, NODE_INPUT, name, from.n + strlen(from_suffix));
    if (axes_as_input) w += put_field(body + w, NODE_INPUT, AXES_NAME, strlen(AXES_NAME));
    memcpy(name, to.p, to.n), memcpy(name + to.n, to_suffix, strlen(to_suffix));
    w += put_field(body + w, NODE_OUTPUT, name, to.n + strlen(to_suffix));
    w += put_field(body + w, NODE_OP_TYPE, op, strlen(op));
    if (!axes_as_input) {
        // AttributeProto { name: "axes", ints: 2, type: INTS (7) }
        const unsigned char axes[] = { 0x0A, 4, 'a', 'x', 'e', 's', 0x40, 2, 0xA0, 0x01, 7 };
        w += put_field(body + w, NODE_ATTRIBUTE, axes, sizeof axes);
    }
    size_t n = put_field(out, GRAPH_NODE, body, w);
    free(body);
    return n;
}

// The model's default-domain opset; 0 if it names none.
static int64_t model_opset(const unsigned char *model, size_t length) {
    cursor top = { model, model + length }, body;
    uint32_t number;
    int bad = 0;
    int64_t version = 0;
    while (field(&top, &number, &body, &bad)) {
        if (number != MODEL_OPSET || !body.p) continue;
        text domain = inner_name(body, OPSET_DOMAIN);
        int64_t v[1];
        if ((!domain.p || domain.n == 0 || text_is(domain, "ai.onnx")) && read_ints(body, OPSET_VERSION, v, 1) == 1) version = v[0];
    }
    return version;
}

unsigned char *piper_planar_decoder(const unsigned char *model, size_t length, size_t *out_length) {
    cursor top = { model, model + length }, body, graph_body = { NULL, NULL };
    uint32_t number;
    int bad = 0;
    while (field(&top, &number, &body, &bad))
        if (number == MODEL_GRAPH && body.p && !graph_body.p) graph_body = body;
    int64_t opset = model_opset(model, length);
    if (bad || !graph_body.p || opset < 1) return NULL;
    split_graph g;
    unsigned char *graph = NULL, *out = NULL;
    char *planar = NULL;  // per node: on planes (a /dec/ node)
    name_map to_planar = { 0 }, to_linear = { 0 }, weights = { 0 };
    if (!split_graph_read(graph_body, &g)) goto done;
    planar = calloc(g.node_count + 1, 1);
    if (!planar || !map_init(&to_planar, g.name_count) || !map_init(&to_linear, g.name_count) || !map_init(&weights, g.name_count)) goto done;
    size_t convs = 0;
    for (size_t i = 0; i < g.node_count; i++) {
        text name = inner_name(g.nodes[i].body, NODE_NAME);
        if (!(name.n > 5 && memcmp(name.p, "/dec/", 5) == 0)) continue;
        plane_kind kind = plane_kind_of(inner_name(g.nodes[i].body, NODE_OP_TYPE));
        if (kind == PLANE_OTHER || g.nodes[i].subgraph) goto done;
        if (kind == PLANE_CONSTANT) {
            if (g.nodes[i].outputs != 1 || !tensor_is_scalar(constant_tensor(&g, g.names[g.nodes[i].first_output]))) goto done;
            continue;  // stays as it is: a scalar broadcasts over either shape
        }
        if (kind == PLANE_CONV && g.nodes[i].inputs < 2) goto done;  // a convolution without its weight
        planar[i] = 1;
        convs += kind == PLANE_CONV;
    }
    if (!convs) goto done;
    // What enters the planar nodes, and what leaves them.
    for (size_t i = 0; i < g.node_count; i++) {
        const split_node *node = &g.nodes[i];
        plane_kind kind = plane_kind_of(inner_name(node->body, NODE_OP_TYPE));
        for (size_t k = 0; k < node->inputs; k++) {
            text t = g.names[node->first_input + k];
            if (!t.n) continue;
            int producer = -1, from_planar = map_get(&g.producer, t, &producer) && planar[producer];
            if (planar[i] && kind == PLANE_CONV && k >= 1) {
                if (k > 2 || map_get(&g.producer, t, NULL)) goto done;  // weights and bias are initializers
                if (k == 1) {
                    cursor w = constant_tensor(&g, t);
                    int64_t dims[8];
                    if (!w.p || read_ints(w, TENSOR_DIMS, dims, 8) != 3) goto done;
                    map_put(&weights, t, 1);
                }
                continue;
            }
            if (planar[i] && !from_planar) {
                cursor c = constant_tensor(&g, t);
                if (c.p) {
                    if (kind != PLANE_ELEMENTWISE || !tensor_is_scalar(c)) goto done;
                } else {
                    map_put(&to_planar, t, 1);
                }
            } else if (!planar[i] && from_planar) {
                map_put(&to_linear, t, 1);
            }
        }
    }
    // A weight read by anything but a planar convolution's weight slot, or a graph output made
    // on planes: not rewritten.
    for (size_t i = 0; i < g.node_count; i++) {
        const split_node *node = &g.nodes[i];
        int conv = planar[i] && plane_kind_of(inner_name(node->body, NODE_OP_TYPE)) == PLANE_CONV;
        for (size_t k = 0; k < node->inputs; k++)
            if (map_get(&weights, g.names[node->first_input + k], NULL) && !(conv && k == 1)) goto done;
    }
    for (size_t i = 0; i < g.field_count; i++) {
        if (g.numbers[i] != GRAPH_OUTPUT) continue;
        cursor c = g.fields[i], b;
        uint32_t n;
        int producer;
        if (field(&c, &n, &b, &bad) && b.p && map_get(&g.producer, inner_name(b, 1), &producer) && planar[producer]) goto done;
    }
    int axes_as_input = opset >= 13;
    size_t capacity = 3 * length + 256 * (g.name_count + g.node_count + 16);
    graph = malloc(capacity);
    if (!graph) goto done;
    size_t gw = 0, node_index = 0;
    int inputs_done = 0;
    for (size_t i = 0; i < g.field_count; i++) {
        cursor f = g.fields[i], c = f, b;
        uint32_t n;
        field(&c, &n, &b, &bad);
        if (g.numbers[i] == GRAPH_NODE && b.p) {
            if (!inputs_done) {
                // The graph's own inputs that enter the planes, before the first node.
                for (size_t k = 0; k < g.field_count; k++) {
                    if (g.numbers[k] != GRAPH_INPUT) continue;
                    cursor c2 = g.fields[k], b2;
                    uint32_t n2;
                    text name = field(&c2, &n2, &b2, &bad) && b2.p ? inner_name(b2, 1) : (text){ NULL, 0 };
                    if (name.p && map_get(&to_planar, name, NULL) && !map_get(&g.producer, name, NULL)) {
                        size_t w = put_reshape_node(graph + gw, name, "", name, PLANAR_SUFFIX, "Unsqueeze", axes_as_input);
                        if (!w) goto done;
                        gw += w;
                    }
                }
                inputs_done = 1;
            }
            const split_node *node = &g.nodes[node_index];
            int is_planar = planar[node_index++];
            int conv = is_planar && plane_kind_of(inner_name(b, NODE_OP_TYPE)) == PLANE_CONV;
            unsigned char *nb = malloc((size_t)(b.end - b.p) * 2 + 64 * (node->inputs + 8) + 256);
            if (!nb) goto done;
            size_t w = 0, input = 0;
            cursor nc = b;
            while (nc.p < nc.end) {
                const unsigned char *start = nc.p;
                uint32_t k;
                cursor a;
                if (!field(&nc, &k, &a, &bad)) break;
                if (k == NODE_INPUT && a.p) {
                    text t = text_of(a);
                    const char *suffix = "";
                    if (is_planar && map_get(&to_planar, t, NULL) && !(conv && input >= 1)) suffix = PLANAR_SUFFIX;
                    if (!is_planar && map_get(&to_linear, t, NULL)) suffix = LINEAR_SUFFIX;
                    input++;
                    if (*suffix) {
                        if (t.n > 4000) { free(nb); goto done; }
                        unsigned char renamed[4100];
                        memcpy(renamed, t.p, t.n), memcpy(renamed + t.n, suffix, strlen(suffix));
                        w += put_field(nb + w, NODE_INPUT, renamed, t.n + strlen(suffix));
                        continue;
                    }
                } else if (k == NODE_INPUT) {
                    input++;
                } else if (k == NODE_ATTRIBUTE && a.p && conv) {
                    size_t aw = put_planar_attribute(nb + w, a);
                    if (!aw) { free(nb); goto done; }
                    w += aw;
                    continue;
                }
                memcpy(nb + w, start, (size_t)(nc.p - start));
                w += (size_t)(nc.p - start);
            }
            // A random node keeps its seed as write_part gave it: the bytes are copied.
            gw += put_field(graph + gw, GRAPH_NODE, nb, w);
            free(nb);
            for (size_t k = 0; k < node->outputs; k++) {
                text t = g.names[node->first_output + k];
                if (!t.n) continue;
                if (!is_planar && map_get(&to_planar, t, NULL)) {
                    size_t rw = put_reshape_node(graph + gw, t, "", t, PLANAR_SUFFIX, "Unsqueeze", axes_as_input);
                    if (!rw) goto done;
                    gw += rw;
                }
                if (is_planar && map_get(&to_linear, t, NULL)) {
                    size_t rw = put_reshape_node(graph + gw, t, "", t, LINEAR_SUFFIX, "Squeeze", axes_as_input);
                    if (!rw) goto done;
                    gw += rw;
                }
            }
            continue;
        }
        if (g.numbers[i] == GRAPH_INITIALIZER && b.p && map_get(&weights, inner_name(b, TENSOR_NAME), NULL)) {
            int64_t dims[4];
            if (read_ints(b, TENSOR_DIMS, dims, 3) != 3) goto done;
            int64_t planar_dims[4] = { dims[0], dims[1], 1, dims[2] };
            unsigned char *tb = malloc((size_t)(b.end - b.p) + 64);
            if (!tb) goto done;
            size_t w = put_ints(tb, TENSOR_DIMS, planar_dims, 4);
            w += copy_without(tb + w, b, TENSOR_DIMS);
            gw += put_field(graph + gw, GRAPH_INITIALIZER, tb, w);
            free(tb);
            continue;
        }
        memcpy(graph + gw, f.p, (size_t)(f.end - f.p));
        gw += (size_t)(f.end - f.p);
    }
    if (axes_as_input) {
        // TensorProto { dims: 1, data_type: INT64 (7), name: AXES_NAME, raw_data: 2 (little-endian) }
        unsigned char t[64];
        size_t w = 0;
        t[w++] = 0x08, t[w++] = 1, t[w++] = 0x10, t[w++] = 7;
        w += put_field(t + w, TENSOR_NAME, AXES_NAME, strlen(AXES_NAME));
        const unsigned char two[8] = { 2, 0, 0, 0, 0, 0, 0, 0 };
        w += put_field(t + w, 9, two, 8);
        gw += put_field(graph + gw, GRAPH_INITIALIZER, t, w);
    }
    out = with_graph(model, length, graph, gw, out_length);
done:
    free(graph);
    free(planar);
    map_free(&to_planar);
    map_free(&to_linear);
    map_free(&weights);
    split_graph_free(&g);
    return out;
}

// MARK: How many frames of context a chunk of the decoder needs

// A decoder (HiFi-GAN) is convolutions, transposed convolutions and element-wise operations:
// each output sample depends on the latent frames within some distance of its own, and a chunk
// decoded with that many frames of the latent on either side gives the whole sentence's
// samples. That distance is found on the graph, from the decoder's input to "output": each
// tensor carries how far back and how far ahead (in frames) its samples reach, and how many
// samples a frame is at its rate. A Conv (stride 1, kernel k, dilation d, pads a before) makes
// sample j of the input's j - a to j - a + (k - 1) d: a back, (k - 1) d - a ahead, in input
// samples. A ConvTranspose of stride s makes sample j of the input's (j + a - (k - 1) d) / s to
// (j + a) / s: ((k - 1) d - a) / s back, a / s ahead, and a rate s times the input's.
// Element-wise operations take the farthest of their inputs. (joe: 11.1 frames back, 10.1
// ahead, so 11 frames either side, where a fixed 14 was used; decoded with 10 either side, 40
// quotations in chunks of 32 frames were their whole sentences' samples to 1 LSB, with 8, 160
// LSB off.)
typedef struct {
    double back, ahead, rate;
} reach_of;

// Reads a Conv or ConvTranspose node's kernel (k), dilation (d), stride (s) and leading pad (a),
// 1-D only; 0 if it has others (groups are fine: they do not change the reach), or if it does
// not keep the length (a Conv's output as long as its input, a ConvTranspose's s times: what
// chunks rely on, each frame giving the same number of samples).
static int conv_geometry(cursor node_body, int transposed, int64_t *k, int64_t *d, int64_t *s, int64_t *a) {
    *k = -1, *d = 1, *s = 1, *a = 0;
    int64_t after = 0, extra = 0;
    cursor c = node_body, f;
    uint32_t number;
    int bad = 0;
    while (field(&c, &number, &f, &bad)) {
        if (number != NODE_ATTRIBUTE || !f.p) continue;
        text name = inner_name(f, ATTR_NAME);
        int64_t v[4];
        long n = read_ints(f, ATTR_INTS, v, 4);
        if (text_is(name, "kernel_shape")) { if (n != 1) return 0; *k = v[0]; }
        else if (text_is(name, "dilations")) { if (n != 1) return 0; *d = v[0]; }
        else if (text_is(name, "strides")) { if (n != 1) return 0; *s = v[0]; }
        else if (text_is(name, "pads")) { if (n != 2) return 0; *a = v[0], after = v[1]; }
        else if (text_is(name, "output_padding")) { if (n != 1) return 0; extra = v[0]; }
        else if (text_is(name, "auto_pad") || text_is(name, "output_shape")) return 0;
    }
    if (bad || !(*k >= 1 && *k <= 4096 && *d >= 1 && *d <= 4096 && *s >= 1 && *s <= 4096 && *a >= 0 && *a <= 1 << 20)) return 0;
    if (!(after >= 0 && after <= 1 << 20 && extra >= 0 && extra < *s)) return 0;
    int64_t span = (*k - 1) * *d;
    return transposed ? *a + after == span + 1 - *s + extra : *s == 1 && *a + after == span;
}

int piper_decoder_context(const unsigned char *model, size_t length, int *back, int *ahead) {
    *back = *ahead = 0;
    cursor top = { model, model + length }, body, graph_body = { NULL, NULL };
    uint32_t number;
    int bad = 0;
    while (field(&top, &number, &body, &bad))
        if (number == MODEL_GRAPH && body.p && !graph_body.p) graph_body = body;
    if (bad || !graph_body.p) return 0;
    split_graph g;
    name_map slot = { 0 };
    reach_of *r = NULL;
    int found = 0;
    if (!split_graph_read(graph_body, &g) || !map_init(&slot, g.name_count) || !(r = calloc(g.name_count + 1, sizeof *r))) goto done;
    size_t used = 0, i = 0;
    double margin = 1e9;  // see the rounding below
    for (; i < g.node_count; i++)  // the decoder's input: reach 0, a sample a frame
        if (text_is(inner_name(g.nodes[i].body, NODE_NAME), "/dec/conv_pre/Conv") && g.nodes[i].inputs > 0) break;
    if (i == g.node_count) goto done;
    map_put(&slot, g.names[g.nodes[i].first_input], (int)used);
    r[used++] = (reach_of){ 0, 0, 1 };
    for (; i < g.node_count; i++) {  // nodes are in order: each after what it reads
        const split_node *node = &g.nodes[i];
        reach_of in = { 0, 0, 0 };
        for (size_t k = 0; k < node->inputs; k++) {
            int at, producer;
            text t = g.names[node->first_input + k];
            if (map_get(&g.producer, t, &producer) && (size_t)producer > i) goto done;  // out of order: cannot follow
            if (!map_get(&slot, t, &at)) continue;
            if (in.rate > 0 && r[at].rate != in.rate) goto done;  // two rates met: not a decoder this reads
            in.rate = r[at].rate;
            if (r[at].back > in.back) in.back = r[at].back;
            if (r[at].ahead > in.ahead) in.ahead = r[at].ahead;
        }
        if (in.rate == 0) continue;  // reads none of it (the speaker's conditioning, a constant)
        text op = inner_name(node->body, NODE_OP_TYPE);
        reach_of out = in;
        int64_t k, d, s, a;
        if (text_is(op, "Conv")) {
            if (!conv_geometry(node->body, 0, &k, &d, &s, &a)) goto done;
            out.back += (double)a / in.rate;
            out.ahead += (double)((k - 1) * d - a) / in.rate;
        } else if (text_is(op, "ConvTranspose")) {
            if (!conv_geometry(node->body, 1, &k, &d, &s, &a)) goto done;
            out.back += (double)((k - 1) * d - a) / (double)s / in.rate;
            out.ahead += (double)a / (double)s / in.rate;
            out.rate = in.rate * (double)s;
        } else if (plane_kind_of(op) != PLANE_ELEMENTWISE && !text_is(op, "Unsqueeze") && !text_is(op, "Squeeze")) {
            goto done;  // something else touches the frames: the reach is not known
        }
        if (out.back < 0) out.back = 0;
        if (out.ahead < 0) out.ahead = 0;
        if (out.rate > 1 && out.back + 1 / out.rate < margin) margin = out.back + 1 / out.rate;
        for (size_t k2 = 0; k2 < node->outputs; k2++) {
            text t = g.names[node->first_output + k2];
            if (!t.n || used > g.name_count) continue;
            map_put(&slot, t, (int)used);
            r[used++] = out;
        }
    }
    text output = { (const unsigned char *)"output", 6 };
    int at;
    if (map_get(&slot, output, &at) && r[at].back < 4096 && r[at].ahead < 4096) {
        // In whole frames. A chunk's samples lie before its end e, so the frames they read lie
        // before e + ahead: up to e + ceil(ahead). They lie at or after its first frame f, so
        // the frames they read lie at or after f - back: f - floor(back) is the first one; but
        // the samples between, at a rate R above 1, must be the whole sentence's too, not the
        // chunk's edge. One that the output reads lies at or after f - (back - b), b being its
        // own reach back from the latent, and the chunk holds it from f - floor(back) on, in
        // steps of 1/R: floor(back) is enough where the fraction of back is below b + 1/R for
        // every one (joe: 0.08 against 3.125 at least, conv_pre's 3 frames coming first); else
        // ceil(back). (A hair past a whole number, float rounding of the sums, does not count.)
        double whole = floor(r[at].back + 1e-9);
        *back = (int)(r[at].back - whole < margin ? whole : ceil(r[at].back - 1e-9));
        *ahead = (int)ceil(r[at].ahead - 1e-9);
        found = 1;
    }
done:
    free(r);
    map_free(&slot);
    split_graph_free(&g);
    return found;
}
