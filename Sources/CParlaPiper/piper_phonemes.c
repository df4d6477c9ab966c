// Text → phoneme ids, as Piper's voices were trained: espeak-ng's IPA for one clause at a time
// (espeak_TextToPhonemes), the clause's punctuation kept as a phoneme, each phoneme mapped
// through the voice's phoneme_id_map with the pad id after it, BOS first and EOS last.
//
// Each id also remembers the word of the caller's text it belongs to. espeak_TextToPhonemes says
// nothing of where its phonemes come from, and its spoken words are not the written ones ("123"
// is three, "for the" one). So espeak-ng also speaks the text once with phoneme events: each
// event names one phoneme (in IPA, without stress marks) and the position of its word. Those
// names, joined, are exactly TextToPhonemes' output without stress marks and spaces, so walking
// the two together gives every phoneme its word; a stress mark goes with the phoneme after it.
// Should they ever disagree, the walk resynchronises nearby and marks the sentence estimated.
// (Measured on espeak-ng 1.51: 2.7 ms for a 12-word sentence, against some 250 ms of model.)
#include "piper_internal.h"
#include <espeak-ng/speak_lib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct piper_id_map {
    struct entry { uint32_t codepoint; int64_t ids[4]; int count; } *entries;
    size_t count;
    int64_t pad, bos, eos;
    int has_pad;
};

// Decodes one UTF-8 scalar at *p (before end); malformed bytes (a sequence cut short, one
// longer than it needs, a surrogate, past U+10FFFF) read as U+FFFD, one at a time.
static uint32_t next_scalar(const unsigned char **p, const unsigned char *end) {
    const unsigned char *s = *p;
    uint32_t c = *s;
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || end - s <= n) { *p = s + 1; return c < 0x80 ? c : 0xFFFD; }
    c = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) { *p = s + 1; return 0xFFFD; }
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[4] = { 0, 0x80, 0x800, 0x10000 };
    if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) { *p = s + 1; return 0xFFFD; }
    *p = s + n + 1;
    return c;
}

static int compare_entries(const void *a, const void *b) {
    uint32_t x = ((const struct entry *)a)->codepoint, y = ((const struct entry *)b)->codepoint;
    return x < y ? -1 : x > y;
}

piper_id_map *piper_id_map_create(const pj_value *map, char *error, size_t error_size) {
    if (!map || map->type != PJ_OBJECT || map->count == 0) {
        snprintf(error, error_size, "its config has no phoneme_id_map");
        return NULL;
    }
    piper_id_map *m = calloc(1, sizeof *m);
    if (!m) { snprintf(error, error_size, "out of memory"); return NULL; }
    m->entries = calloc(map->count, sizeof *m->entries);
    if (!m->entries) { free(m); snprintf(error, error_size, "out of memory"); return NULL; }
    m->bos = 1; m->eos = 2; m->pad = 0;
    for (const pj_value *v = map->child; v; v = v->next) {
        const unsigned char *k = (const unsigned char *)v->key, *end = k + strlen(v->key);
        if (k == end) continue;
        uint32_t c = next_scalar(&k, end);
        if (k != end || v->type != PJ_ARRAY || v->count == 0 || v->count > 4) {
            snprintf(error, error_size, "its phoneme_id_map entry \"%s\" is not one phoneme with 1 to 4 ids", v->key);
            piper_id_map_free(m);
            return NULL;
        }
        struct entry *e = &m->entries[m->count++];
        e->codepoint = c;
        for (const pj_value *id = v->child; id; id = id->next) {
            if (id->type != PJ_NUMBER || id->number < 0 || id->number > 1e6) {
                snprintf(error, error_size, "its phoneme_id_map entry \"%s\" has an id that is not a small number", v->key);
                piper_id_map_free(m);
                return NULL;
            }
            e->ids[e->count++] = (int64_t)id->number;
        }
        if (c == '_') { m->pad = e->ids[0]; m->has_pad = 1; }
        if (c == '^') m->bos = e->ids[0];
        if (c == '$') m->eos = e->ids[0];
    }
    qsort(m->entries, m->count, sizeof *m->entries, compare_entries);
    return m;
}

void piper_id_map_free(piper_id_map *map) {
    if (!map) return;
    free(map->entries);
    free(map);
}

static const struct entry *lookup(const piper_id_map *m, uint32_t c) {
    size_t lo = 0, hi = m->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->entries[mid].codepoint == c) return &m->entries[mid];
        if (m->entries[mid].codepoint < c) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

size_t piper_id_map_ids(const piper_id_map *m, const char *phonemes, int64_t *out, size_t capacity) {
    size_t n = 0, per_phoneme = 4 + (m->has_pad ? 1 : 0);
    if (capacity < 3) return 0;
    out[n++] = m->bos;
    if (m->has_pad) out[n++] = m->pad;
    const unsigned char *p = (const unsigned char *)phonemes, *end = p + strlen(phonemes);
    while (p < end && n + per_phoneme < capacity) {
        const struct entry *e = lookup(m, next_scalar(&p, end));
        if (!e) continue;
        for (int i = 0; i < e->count; i++) out[n++] = e->ids[i];
        if (m->has_pad) out[n++] = m->pad;
    }
    out[n++] = m->eos;
    return n;
}

// MARK: Building a sentence

static int grow(void **p, size_t *capacity, size_t needed, size_t size) {
    if (needed <= *capacity) return 1;
    size_t cap = *capacity ? *capacity : 64;
    while (cap < needed) cap *= 2;
    void *q = realloc(*p, cap * size);
    if (!q) return 0;
    *p = q;
    *capacity = cap;
    return 1;
}

static int push_id(piper_sentence *s, int64_t id, int word) {
    if (!grow((void **)&s->ids, &s->id_capacity, s->id_count + 1, sizeof *s->ids)) return 0;
    size_t cap = s->id_capacity;
    int *w = realloc(s->word_of_id, cap * sizeof *w);
    if (!w) return 0;
    s->word_of_id = w;
    uint32_t *ph = realloc(s->phoneme_of_id, cap * sizeof *ph);
    if (!ph) return 0;
    s->phoneme_of_id = ph;
    s->ids[s->id_count] = id;
    s->word_of_id[s->id_count] = word;
    s->phoneme_of_id[s->id_count] = 0;
    s->id_count++;
    return 1;
}

static void reset(piper_sentence *s) {
    s->id_count = 0;
    s->word_count = 0;
    s->sentence_position = 0;
    s->estimated = 0;
    s->continues = 0;
    s->goes_on = 0;
    s->phonemes = 0;
    s->skipped = 0;
    s->first_skipped = 0;
}

// Appends one phoneme (a scalar) and its pad; 0 only when out of memory (then `error`). A
// phoneme the voice has no id for is left out and counted, as Piper does: voices are trained
// on espeak-ng 1.52's phonemes and 1.51 gives a few others. A sentence that loses most of its
// phonemes this way fails (too_many_skipped): then the voice was not made for these phonemes.
static int push_phoneme(piper_sentence *s, const piper_id_map *m, uint32_t c, int word, char *error, size_t error_size) {
    const struct entry *e = lookup(m, c);
    s->phonemes++;
    if (!e) {
        if (s->skipped++ == 0) s->first_skipped = c;
        return 1;
    }
    for (int i = 0; i < e->count; i++)
        if (!push_id(s, e->ids[i], word)) { snprintf(error, error_size, "out of memory"); return 0; }
    if (e->count > 0) s->phoneme_of_id[s->id_count - (size_t)e->count] = c;
    if (m->has_pad && !push_id(s, m->pad, -1)) { snprintf(error, error_size, "out of memory"); return 0; }
    return 1;
}

// Whether `s` lost so many phonemes that the voice cannot be meant for them: more than a
// quarter, and more than two (a short sentence may lose its one odd phoneme). Then `error`.
static int too_many_skipped(const piper_sentence *s, char *error, size_t error_size) {
    if (s->skipped <= 2 || s->skipped * 4 <= s->phonemes) return 0;
    uint32_t c = s->first_skipped;
    char utf8[8] = { 0 };
    size_t n = 0;
    piper_put_utf8(utf8, &n, c);
    snprintf(error, error_size,
             "the voice has no id for %d of the %d phonemes espeak-ng gave for a sentence (the first: '%s', U+%04X): "
             "its phoneme_id_map is not for espeak-ng's IPA phonemes",
             s->skipped, s->phonemes, utf8, (unsigned)c);
    return 1;
}

// MARK: Phoneme events

// What espeak-ng's phoneme events said: each phoneme's IPA bytes, flattened, with the word
// (1-based scalar position) every byte belongs to; and each word's length.
typedef struct {
    unsigned char *bytes;
    int *word_of_byte;
    size_t count, capacity;
    struct { int position, length; } *words;
    size_t word_count, word_capacity;
    size_t limit;  // the most phoneme bytes kept (see TRACE_LIMIT)
    int offset;    // the scalars of the text before the window being traced
    int failed;
    int event_bytes;  // of a phoneme's name in an event (piper_espeak_state)
} event_trace;

// After the bytes of a phoneme event cut short (piper-phonemize's espeak-ng keeps 4 bytes of a
// name: "ɑːɹ" is "ɑː"), where the phonemes TextToPhonemes gives may go on: not UTF-8.
enum { CUT_EVENT = 0xFF };

static event_trace *tracing;

static int trace_callback(short *wav, int count, espeak_EVENT *events) {
    (void)wav; (void)count;
    event_trace *t = tracing;
    if (!t || t->failed) return 1;
    for (espeak_EVENT *e = events; e && e->type != espeakEVENT_LIST_TERMINATED; e++) {
        if (e->type == espeakEVENT_WORD) {
            if (!grow((void **)&t->words, &t->word_capacity, t->word_count + 1, sizeof *t->words)) { t->failed = 1; return 1; }
            t->words[t->word_count].position = e->text_position + t->offset;
            t->words[t->word_count].length = e->length;
            t->word_count++;
        } else if (e->type == espeakEVENT_PHONEME) {
            size_t n = strnlen(e->id.string, t->event_bytes == 4 ? 4 : sizeof e->id.string);
            if (n == 0) continue;  // a pause
            int cut = t->event_bytes == 4 && n == 4;
            if (cut) {
                // A name cut inside a character: its first bytes go too.
                const unsigned char *b = (const unsigned char *)e->id.string;
                size_t lead = n;
                while (lead > 0 && (b[lead - 1] & 0xC0) == 0x80) lead--;
                if (lead > 0 && b[lead - 1] >= 0xC0) {
                    size_t need = b[lead - 1] >= 0xF0 ? 4 : b[lead - 1] >= 0xE0 ? 3 : 2;
                    if (n - (lead - 1) < need) n = lead - 1;
                }
            }
            if (t->count + n + (size_t)cut > t->limit) return 1;  // runaway: synthesis stops, the rest is a guess
            // The two grow together: word_of_byte is moved only when the capacity changes (a
            // realloc on every event made a text of many phonemes quadratic where realloc copies).
            size_t before = t->capacity;
            if (!grow((void **)&t->bytes, &t->capacity, t->count + n + (size_t)cut, 1)) { t->failed = 1; return 1; }
            if (t->capacity != before || !t->word_of_byte) {
                int *w = realloc(t->word_of_byte, t->capacity * sizeof *w);
                if (!w) { t->failed = 1; return 1; }
                t->word_of_byte = w;
            }
            for (size_t i = 0; i < n; i++) {
                // Stress marks (U+02C8, U+02CC: CB 88, CB 8C), which espeak-ng 1.52 puts in its
                // phoneme events and 1.51 does not, are matched on their own (see below): left out.
                const unsigned char *b = (const unsigned char *)e->id.string;
                if (b[i] == 0xCB && i + 1 < n && (b[i + 1] == 0x88 || b[i + 1] == 0x8C)) { i++; continue; }
                t->bytes[t->count] = b[i];
                t->word_of_byte[t->count] = e->text_position + t->offset;
                t->count++;
            }
            if (cut) {
                t->bytes[t->count] = CUT_EVENT;
                t->word_of_byte[t->count] = e->text_position + t->offset;
                t->count++;
            }
        }
    }
    return 0;
}

static int word_length(const event_trace *t, int position) {
    for (size_t i = 0; i < t->word_count; i++)
        if (t->words[i].position == position) return t->words[i].length > 0 ? t->words[i].length : 1;
    return 1;
}

// The index in s.words of the word at `position`, added if it is new.
static int word_index(piper_sentence *s, const event_trace *t, int position) {
    for (size_t i = s->word_count; i > 0; i--)
        if (s->words[i - 1].position == position) return (int)(i - 1);
    if (!grow((void **)&s->words, &s->word_capacity, s->word_count + 1, sizeof *s->words)) return -2;
    s->words[s->word_count] = (struct piper_word){ position, word_length(t, position), -1 };
    if (s->sentence_position == 0) s->sentence_position = position;
    return (int)s->word_count++;
}

// The zero bytes after every text given to espeak-ng, which reads a little past the end of a
// text in places (and its windows and words are copies).
enum { TEXT_PADDING = 8 };

// MARK: Words spoken joined to the one before

// espeak-ng speaks some words as one with the word before: "in the" ɪnðə, "to be" təbi, "would
// have" wʊdhɐv, "p.m." pˌiːˈɛm. Its phoneme events then name only the first word, and the second
// had no phoneme of its own, so its time was a guess. Such a word is found in the text (no event
// names it) and spoken alone once, before the walk; then it is split off the end of its
// neighbour's phonemes where they end as it does: the same consonants in the same order, vowels
// free (a joined word's are often weakened: "have" hˈæv in wʊdhɐv), a vowel at its start taking
// as many of the neighbour's vowels as it has itself ("am" ˈæm in aɪɐm: aɪ, ɐm). The neighbour
// keeps at least one phoneme. A word that does not match stays a guess.
enum { JOINED_PHONEMES = 24, JOINED_BYTES = 64, JOINED_MAX = 4096 };

typedef struct {
    struct joined_word { int position, length, count; uint32_t phonemes[JOINED_PHONEMES]; } *words;
    size_t count, capacity;
    int *named;          // the positions of the words phoneme events name, sorted
    size_t named_count, named_capacity;
    int *starts;         // where the text's written words start, in order
    size_t start_count, start_capacity;
} joined_list;

static int is_space(uint32_t c);

// Punctuation and symbols that part written words (an apostrophe does not).
static int parts_words(uint32_t c) {
    if (c < 0x80) return c != '\'' && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
    return (c >= 0xA1 && c <= 0xBF && c != 0xAA && c != 0xBA && c != 0xB5) || (c >= 0x2010 && c <= 0x205E && c != 0x2019) ||
           (c >= 0x3001 && c <= 0x301F) || (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20);
}

static int is_vowel(uint32_t c) {
    switch (c) {
    case 'a': case 'e': case 'i': case 'o': case 'u': case 'y':
    case 0xE6: case 0xF8: case 0x153: case 0x276:                     // æ ø œ ɶ
    case 0x250: case 0x251: case 0x252: case 0x254: case 0x258: case 0x259: case 0x25A: case 0x25B:  // ɐ ɑ ɒ ɔ ɘ ə ɚ ɛ
    case 0x25C: case 0x25D: case 0x25E: case 0x264: case 0x268: case 0x26A: case 0x26F: case 0x275:  // ɜ ɝ ɞ ɤ ɨ ɪ ɯ ɵ
    case 0x289: case 0x28A: case 0x28C: case 0x28F: case 0x1D7B:     // ʉ ʊ ʌ ʏ ᵻ
        return 1;
    default:
        return 0;
    }
}

// Length, stress and other marks that go with a phoneme rather than being one.
static int is_mark(uint32_t c) { return (c >= 0x2B0 && c <= 0x2FF) || (c >= 0x300 && c <= 0x36F) || (c >= 0x1DC0 && c <= 0x1DFF); }

// A flap is how a t or d between vowels is spoken ("that a" ðˌæɾə).
static int same_consonant(uint32_t a, uint32_t b) {
    if (a == b) return 1;
    return (a == 0x27E && (b == 't' || b == 'd')) || (b == 0x27E && (a == 't' || a == 'd'));
}

static int compare_ints(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

// The index of the first of `sorted[0..n)` that is at least `value` (n if none).
static size_t first_at_or_after(const int *sorted, size_t n, int value) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[mid] < value) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// The words of the window [text, end) of the text (the scalars before it: `offset`) that no
// phoneme event names (espeak-ng may still have a word event for one), each with its phonemes
// spoken alone; and the positions of the words phoneme events name (the trace's bytes from
// `first_byte`, the window's), sorted; all added to `out`. Returns 0 only when out of memory.
static int find_joined(const char *text, const char *text_end, int offset, const event_trace *t, size_t first_byte, const piper_espeak *espeak,
                       joined_list *out) {
    size_t runs = 0;  // of bytes with one word: a word's phonemes come together
    for (size_t i = first_byte; i < t->count; i++) runs += i == first_byte || t->word_of_byte[i] != t->word_of_byte[i - 1];
    if (!grow((void **)&out->named, &out->named_capacity, out->named_count + runs + 1, sizeof *out->named)) return 0;
    int *positions = out->named + out->named_count;  // the window's, then added to the others
    size_t named = 0;
    for (size_t i = first_byte; i < t->count; i++)
        if (named == 0 || positions[named - 1] != t->word_of_byte[i]) positions[named++] = t->word_of_byte[i];
    qsort(positions, named, sizeof *positions, compare_ints);
    int in_order = out->named_count == 0 || named == 0 || out->named[out->named_count - 1] <= positions[0];
    out->named_count += named;
    if (!in_order) qsort(out->named, out->named_count, sizeof *out->named, compare_ints);  // odd positions
    if (!in_order) positions = out->named, named = out->named_count;
    const unsigned char *q = (const unsigned char *)text, *end = (const unsigned char *)text_end;
    int position = offset;
    const unsigned char *word = NULL;
    int word_position = 0;
    for (;;) {
        const unsigned char *at = q;
        uint32_t c = q < end ? next_scalar(&q, end) : 0;
        position++;
        int inside = c && !is_space(c) && !parts_words(c);
        if (inside && !word) {
            word = at, word_position = position;
            if (!grow((void **)&out->starts, &out->start_capacity, out->start_count + 1, sizeof *out->starts)) return 0;
            out->starts[out->start_count++] = position;
        }
        if (inside || !word) { if (!c) break; continue; }
        // The word [word, at) at [word_position, position).
        size_t at_or_after = first_at_or_after(positions, named, word_position);
        size_t bytes = (size_t)(at - word);
        if (!(at_or_after < named && positions[at_or_after] < position) && out->count < JOINED_MAX && word_position > 1 && bytes < JOINED_BYTES) {
            char alone[JOINED_BYTES + TEXT_PADDING] = { 0 };
            memcpy(alone, word, bytes);
            const void *p = alone;
            const char *phonemes = espeak->text_to_phonemes(&p, espeakCHARS_UTF8, espeakPHONEMES_IPA);
            struct joined_word j = { word_position, position - word_position, 0, { 0 } };
            const unsigned char *r = (const unsigned char *)(phonemes ? phonemes : ""), *rend = r + strlen((const char *)r);
            int in_switch = 0;
            while (r < rend && j.count < JOINED_PHONEMES) {
                uint32_t ph = next_scalar(&r, rend);
                if (ph == '(') { in_switch = 1; continue; }
                if (in_switch) { if (ph == ')') in_switch = 0; continue; }
                if (ph == ' ' || ph == '_' || is_mark(ph)) continue;
                j.phonemes[j.count++] = ph;
            }
            if (j.count > 0 && r >= rend) {
                if (!grow((void **)&out->words, &out->capacity, out->count + 1, sizeof *out->words)) return 0;
                out->words[out->count++] = j;
            }
        }
        word = NULL;
        if (!c) break;
    }
    return 1;
}

// Where joined word `j` starts in the phonemes `ph[0..n)` (base phonemes only, oldest first):
// the index of its first phoneme (0: they are all its own), or -1 if they do not end as it does.
static int joined_start(const struct joined_word *j, const uint32_t *ph, int n) {
    int i = j->count - 1, k = n - 1;
    // A linking r before a vowel ("no longer in": ...ɡɚɹ ɪn) ends a word that alone ends in a vowel.
    if (k > 0 && ph[k] == 0x279 && i >= 0 && is_vowel(j->phonemes[i])) k--;
    while (i >= 0) {
        if (k < 0) return -1;
        if (!is_vowel(j->phonemes[i])) {
            if (is_vowel(ph[k]) || !same_consonant(j->phonemes[i], ph[k])) return -1;
            i--, k--;
            continue;
        }
        int a = i;
        while (a > 0 && is_vowel(j->phonemes[a - 1])) a--;
        if (!is_vowel(ph[k])) return -1;
        int b = k;
        while (b > 0 && is_vowel(ph[b - 1])) b--;
        int take = k - b + 1, own = i - a + 1;
        if (a == 0 && own < take) take = own;
        k -= take;
        i = a - 1;
    }
    return k >= -1 ? k + 1 : -1;
}

// Whether a written word starts at `position` (joined words are found in the text).
static int is_word_start(const joined_list *j, int position) {
    size_t i = first_at_or_after(j->starts, j->start_count, position);
    return i < j->start_count && j->starts[i] == position;
}

// Gives the joined words of `j` their own phonemes in `s` (see above). Returns 0 only when out
// of memory.
static int split_joined(piper_sentence *s, const joined_list *j) {
    if (j->count == 0 || !s->phoneme_of_id) return 1;
    for (size_t w = 0; w < s->word_count; w++) {
        struct piper_word *p = &s->words[w];
        if (p->first_id < 0) continue;
        // The word espeak-ng names next: the joined words lie before it.
        size_t after = first_at_or_after(j->named, j->named_count, p->position + 1);
        int next = after < j->named_count ? j->named[after] : INT32_MAX;
        size_t first = 0, last;  // joined words [first, last) after p
        for (size_t lo = 0, hi = j->count; lo < hi;) {
            size_t mid = (lo + hi) / 2;
            if (j->words[mid].position <= p->position) lo = first = mid + 1;
            else hi = mid;
        }
        for (last = first; last < j->count && j->words[last].position < next; last++) {}
        if (first == last) continue;
        // p's phonemes (their ids), to its last; a word of more is left as it is.
        int ids[96];
        uint32_t ph[96];
        int n = 0;
        for (size_t i = (size_t)p->first_id; i < s->id_count && n <= 96; i++) {
            if (s->word_of_id[i] == (int)w + 1 && (size_t)w + 1 < s->word_count) break;
            if (s->word_of_id[i] != (int)w || !s->phoneme_of_id[i] || is_mark(s->phoneme_of_id[i])) continue;
            if (n == 96) { n++; break; }
            ids[n] = (int)i, ph[n] = s->phoneme_of_id[i], n++;
        }
        if (n > 96) continue;
        // From the last joined word back, while each matches.
        int starts[64];
        size_t matched = 0;
        for (size_t g = last; g > first && matched < sizeof starts / sizeof starts[0]; g--) {
            int k = joined_start(&j->words[g - 1], ph, n);
            // All of them: espeak-ng put the word's phonemes at a position inside the word before
            // ("To be": be's events at 2, the o of To), which the joined word is the true place of.
            if (k == 0 && matched == 0 && g == last && !is_word_start(j, p->position)) {
                if (s->sentence_position == p->position) s->sentence_position = j->words[g - 1].position;
                p->position = j->words[g - 1].position;
                p->length = j->words[g - 1].length;
                break;
            }
            if (k <= 0) break;
            // Its first id: a stress mark just before its first phoneme goes with it.
            int id = ids[k];
            for (int i = id - 1; i > (k > 0 ? ids[k - 1] : p->first_id); i--) {
                if (s->phoneme_of_id[i] == 0x2C8 || s->phoneme_of_id[i] == 0x2CC) { id = i; break; }
                if (s->phoneme_of_id[i]) break;
            }
            starts[matched++] = id;
            n = k;
        }
        if (matched == 0) continue;
        if (!grow((void **)&s->words, &s->word_capacity, s->word_count + matched, sizeof *s->words)) return 0;
        p = &s->words[w];
        memmove(&s->words[w + 1 + matched], &s->words[w + 1], (s->word_count - w - 1) * sizeof *s->words);
        for (size_t i = 0; i < s->id_count; i++)
            if (s->word_of_id[i] > (int)w) s->word_of_id[i] += (int)matched;
        // starts[] runs from the last word back; the new words go in text order.
        for (size_t m = 0; m < matched; m++) {
            const struct joined_word *jw = &j->words[last - matched + m];
            int from = starts[matched - 1 - m];
            s->words[w + 1 + m] = (struct piper_word){ jw->position, jw->length, from, 0, { 0 } };
        }
        s->word_count += matched;
        if (p->position + p->length > s->words[w + 1].position) p->length = s->words[w + 1].position - p->position;
        // The ids after each start go with their words.
        for (size_t m = 1; m <= matched; m++) {
            size_t to = m < matched ? (size_t)s->words[w + m + 1].first_id : s->id_count;
            for (size_t i = (size_t)s->words[w + m].first_id; i < to; i++) {
                if (s->word_of_id[i] == (int)w) s->word_of_id[i] = (int)(w + m);
                else if (s->word_of_id[i] >= 0) break;
            }
        }
        w += matched;
    }
    return 1;
}

// MARK: Clauses and sentences

static int is_space(uint32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == 0xA0 || c == 0x3000; }

static int is_sentence_end(uint32_t c) { return c == '.' || c == '?' || c == '!' || c == 0x3002 || c == 0xFF1F || c == 0xFF01; }

// The punctuation that ends a clause, as Piper writes it after the clause's phonemes (espeak-ng
// 1.51 does not say; the clause's last character does): 0 if none.
static uint32_t terminator_of(const char *start, const char *end) {
    const unsigned char *q = (const unsigned char *)start, *qend = (const unsigned char *)end;
    uint32_t last = 0;
    while (q < qend) {
        uint32_t c = next_scalar(&q, qend);
        if (!is_space(c)) last = c;
    }
    switch (last) {
    case '.': case '?': case '!': case ',': case ':': case ';': return last;
    case 0x3002: return '.';
    case 0xFF1F: return '?';
    case 0xFF01: return '!';
    case 0xFF0C: case 0x3001: return ',';
    default: return 0;
    }
}

// Each word's phonemes as fed to the voice (IPA, UTF-8), from its ids: a stress mark goes
// with the word of the phoneme after it (none across a space), and a phoneme that does not fit
// in `ipa` is left out.
static void set_ipa(piper_sentence *s) {
    for (size_t w = 0; w < s->word_count; w++) s->words[w].ipa_length = 0;
    char stress[8];
    size_t stress_length = 0;
    for (size_t i = 0; i < s->id_count; i++) {
        uint32_t c = s->phoneme_of_id[i];
        if (!c) continue;
        char utf8[8];
        size_t n = 0;
        piper_put_utf8(utf8, &n, c);
        if (c == 0x2C8 || c == 0x2CC) {
            if (n <= sizeof stress - stress_length) memcpy(stress + stress_length, utf8, n), stress_length += n;
            continue;
        }
        int word = s->word_of_id[i];
        if (word >= 0 && word < (int)s->word_count) {
            struct piper_word *w = &s->words[word];
            if ((size_t)w->ipa_length + stress_length + n <= sizeof w->ipa) {
                memcpy(w->ipa + w->ipa_length, stress, stress_length);
                memcpy(w->ipa + w->ipa_length + stress_length, utf8, n);
                w->ipa_length += (int)(stress_length + n);
            }
            stress_length = 0;
        } else if (c == ' ') {
            stress_length = 0;
        }
    }
}

// Ends sentence `s` (its EOS), hands it to `sentence` and starts the next one empty, which
// continues it if `goes_on` (the rest of its sentence follows). Returns what `sentence`
// returned, or -1 with `error` set.
static int end_sentence(piper_sentence *s, const piper_id_map *map, const joined_list *joined, int goes_on,
                        int (*sentence)(void *context, piper_sentence *s), void *context, char *error, size_t error_size) {
    if (!push_id(s, map->eos, -1) || !split_joined(s, joined)) { snprintf(error, error_size, "out of memory"); return -1; }
    set_ipa(s);
    s->goes_on = goes_on;
    if (too_many_skipped(s, error, error_size)) return -1;
    int status = sentence(context, s);
    reset(s);
    s->continues = goes_on;
    return status;
}

// With the early first clause, a first clause that goes on past FIRST_PART_IDS phoneme ids is
// cut at the first word after them, if FIRST_PART_REST bytes of phonemes (some 20 phonemes)
// follow in the clause: the text's encoder sees the whole sentence before its first sound,
// and takes some 0.2 ms per id on 2 cores (a 40-word sentence, 427 ids: 70 to 105 ms), so a
// long first sentence is heard sooner spoken as two clauses, the first ending as at a comma.
enum { FIRST_PART_IDS = 100, FIRST_PART_REST = 40 };

// The rate (words per minute) espeak-ng speaks the text at for its phoneme events: its phonemes
// and their words do not change with the rate, the audio it makes (and drops) shortens. At 350
// the 200 English quotations of the Piper benchmark gave the same phoneme events as at 175,
// with espeak-ng 1.52 and 1.51 (and sentences in German, French, Spanish, Greek, Russian,
// Arabic and Chinese), in 2.8 ms a line instead of 5.0. Above some 400 it slows down again
// (espeak-ng's speed-up of its audio).
enum { TRACE_RATE = 350 };

// The most phoneme bytes the trace keeps per byte of text. Spoken numbers, symbols and letters
// of other scripts give up to some 15 (a 19-digit number), but espeak-ng can run away: on
// "\x01B" (now given to it as spaces) 1.51 read on past the end of the text and made minutes
// of audio (the fuzz target). Should it run away on something else, the trace stops there and
// the words after it are timed by a guess.
enum { TRACE_LIMIT = 64 };

// Traces the window text[from, to) of the text (whole clauses; `offset` scalars before it):
// espeak-ng speaks it with phoneme events (its audio is dropped) at TRACE_RATE, the same
// events as at any rate with less audio made for nothing. Returns 0 only when out of memory.
static int trace_window(const char *text, size_t from, size_t to, int offset, event_trace *t, const piper_espeak *espeak) {
    char *window = calloc(to - from + TEXT_PADDING, 1);
    if (!window) return 0;
    memcpy(window, text + from, to - from);
    t->offset = offset;
    tracing = t;
    espeak->set_callback(trace_callback);
    int rate = espeak->get_parameter(espeakRATE, 1);
    espeak->set_parameter(espeakRATE, TRACE_RATE, 0);
    espeak->synth(window, to - from + 1, 0, POS_CHARACTER, 0, espeakCHARS_UTF8, NULL, NULL);
    espeak->set_parameter(espeakRATE, rate, 0);
    tracing = NULL;
    free(window);
    return !t->failed;
}

void piper_espeak_probe(const piper_espeak *espeak) {
    if (!espeak->own || espeak->state->event_bytes) return;
    espeak->state->event_bytes = 8;
    if (piper_espeak_select(espeak, "en-us") != EE_OK) return;
    // "car" is kɑːɹ: events that carry 8 bytes of a name give it whole; piper-phonemize's, kɑː.
    char text[4 + TEXT_PADDING] = "car";
    event_trace t = { .limit = 4096, .event_bytes = 8 };
    int traced = trace_window(text, 0, 3, 0, &t, espeak);
    const void *p = text;
    const char *phonemes = espeak->text_to_phonemes(&p, espeakCHARS_UTF8, espeakPHONEMES_IPA);
    char plain[64];
    size_t n = 0;
    for (const char *q = phonemes ? phonemes : ""; *q && n < sizeof plain; q++) {
        const unsigned char *b = (const unsigned char *)q;
        if (b[0] == 0xCB && (b[1] == 0x88 || b[1] == 0x8C)) { q++; continue; }  // stress marks
        if (*q != ' ') plain[n++] = *q;
    }
    if (traced && !(t.count == n && memcmp(t.bytes, plain, n) == 0)) espeak->state->event_bytes = 4;
    free(t.bytes), free(t.word_of_byte), free(t.words);
}

// The scalars in [p, end), counted as next_scalar reads them.
static int scalars_in(const char *p, const char *end) {
    const unsigned char *q = (const unsigned char *)p, *qend = (const unsigned char *)end;
    int n = 0;
    while (q < qend) next_scalar(&q, qend), n++;
    return n;
}

int piper_phonemize(const char *text, int espeak_kind, const char *espeak_voice, const piper_id_map *map, int early_first_clause,
                    int (*sentence)(void *context, piper_sentence *s), void *context, char *error, size_t error_size) {
    const piper_espeak *espeak = piper_espeak_get(espeak_kind);
    piper_espeak_probe(espeak);
    if (piper_espeak_select(espeak, espeak_voice) != EE_OK) {
        snprintf(error, error_size, "espeak-ng has no voice '%s', which this Piper voice's config names (espeak.voice)", espeak_voice);
        return -1;
    }
    size_t text_length = strlen(text);
    char *padded = calloc(text_length + TEXT_PADDING, 1);
    if (!padded) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    memcpy(padded, text, text_length);
    // Malformed UTF-8 and control characters (neither in Parla's own text) are given to
    // espeak-ng as spaces, a byte for a byte, as next_scalar reads them: one character each,
    // at the same place. espeak-ng 1.51 took a lead byte's continuation bytes past a clause's
    // end and then read on beyond the buffer, and "\x01B" (its embedded command character
    // before a letter that is no command) made it read past the end of the text, forever.
    for (const unsigned char *q = (const unsigned char *)padded, *end = q + text_length; q < end;) {
        const unsigned char *at = q;
        next_scalar(&q, end);
        int control = *at < 0x20 ? *at != '\t' && *at != '\n' && *at != '\r' : *at == 0x7F;
        if ((q == at + 1 && *at >= 0x80) || control) padded[at - (const unsigned char *)padded] = ' ';
    }
    text = padded;
    // The phonemes and their words, from espeak-ng speaking the text with phoneme events, a
    // clause at a time as the walk comes to it (trace_window): a long text's first sentence
    // does not wait for all of it (10,000 characters took 0.5 s), and no more is traced than
    // is spoken when the speech is stopped.
    event_trace trace = { .limit = text_length * TRACE_LIMIT + 4096, .event_bytes = espeak->own ? espeak->state->event_bytes : 8 };
    size_t traced = 0;    // text[0, traced) is traced
    int traced_scalars = 0;
    int status = 0;
    const char *text_end = text + text_length;
    joined_list joined = { 0 };
    piper_sentence s = { 0 };
    size_t cursor = 0;       // in trace.bytes
    int last_word = -1;      // the word of the last phoneme matched
    // The clauses come from espeak-ng a batch at a time, ahead of the walk. It reads one
    // character ahead: the pointer it returns is one past the start of the next clause, whose
    // first character it keeps for the next call, and anything spoken between two calls (the
    // trace) loses it ("makes" became ˈeɪks). So a batch's calls follow each other, and the next
    // batch starts afresh where its first clause starts. A batch ends with a sentence, once it
    // has twice the text of the one before (the first: one sentence), so the first sound does
    // not wait for a long text's clauses either (10,000 characters: 26 ms, against 585 for the
    // trace). The last clause comes from a call at the end of the text. A clause's own text
    // is [clause, pointer - 1); the next one starts on the character there.
    struct clause_record { char *phonemes; const char *end, *next; int last; } *clauses = NULL;
    size_t clause_count = 0, clause_capacity = 0, calls = 0, batch_goal = 1;
    const char *batch_start = text;  // where the next batch starts; NULL: the text is read
    const char *clause = text;
    for (size_t k = 0; status == 0; k++) {
        if (k == clause_count && batch_start) {
            const char *from = batch_start, *start = batch_start;
            const void *p = batch_start;
            while (status == 0) {
                const void *before = p;
                const char *phonemes = espeak->text_to_phonemes(&p, espeakCHARS_UTF8, espeakPHONEMES_IPA);
                if (++calls > text_length + 1) p = NULL;  // never loop
                // Past the text's end: it read the terminating zero as part of a character (a
                // stray UTF-8 lead byte last), and the next call would read beyond the buffer.
                if (p && (const char *)p > text_end) p = NULL;
                const char *clause_end = p ? (const char *)p - 1 : text_end;
                if (clause_end < start) clause_end = start;
                if (clause_end > text_end) clause_end = text_end;
                if (p && p == before) p = NULL;  // no progress: never loop
                // The next clause starts on a character (the pointer is one character past it).
                const char *next = p ? clause_end : text_end;
                while (next > text && ((unsigned char)*next & 0xC0) == 0x80) next--;
                char *own = strdup(phonemes ? phonemes : "");
                if (!own || !grow((void **)&clauses, &clause_capacity, clause_count + 1, sizeof *clauses)) {
                    free(own);
                    snprintf(error, error_size, "out of memory");
                    status = -1;
                    break;
                }
                clauses[clause_count++] = (struct clause_record){ own, clause_end, next, p == NULL };
                const char *clause_start = start;
                start = clause_end;
                if (!p) {
                    batch_start = NULL;
                    break;
                }
                if (is_sentence_end(terminator_of(clause_start, clause_end)) && next > from && (size_t)(next - from) >= batch_goal) {
                    batch_start = next;
                    batch_goal = 2 * (size_t)(next - from);
                    break;
                }
            }
            if (status != 0) break;
        }
        if (k >= clause_count) break;
        const char *phonemes = clauses[k].phonemes, *clause_end = clauses[k].end;
        int more = !clauses[k].last;  // a clause follows
        // The text up to the next clause is traced.
        size_t window_end = (size_t)(clauses[k].next - text);
        if (window_end > traced) {
            size_t first_byte = trace.count;
            if (!trace_window(text, traced, window_end, traced_scalars, &trace, espeak) ||
                !find_joined(text + traced, text + window_end, traced_scalars, &trace, first_byte, espeak, &joined)) {
                snprintf(error, error_size, "out of memory");
                status = -1;
                break;
            }
            traced_scalars += scalars_in(text + traced, text + window_end);
            traced = window_end;
        }
        uint32_t terminator = terminator_of(clause, clause_end);
        if (s.id_count == 0) {
            if (!push_id(&s, map->bos, -1) || (map->has_pad && !push_id(&s, map->pad, -1))) {
                snprintf(error, error_size, "out of memory");
                status = -1;
                break;
            }
        } else if (!push_phoneme(&s, map, ' ', -1, error, error_size)) {
            status = -1;
            break;
        }
        const unsigned char *r = (const unsigned char *)(phonemes ? phonemes : ""), *rend = r + strlen((const char *)r);
        int in_switch = 0;
        int stress_at = -1;  // the id of a stress mark waiting for its phoneme
        while (r < rend) {
            const unsigned char *at = r;
            uint32_t c = next_scalar(&r, rend);
            // A change of language, "(fr)": not spoken.
            if (c == '(') { in_switch = 1; continue; }
            if (in_switch) { if (c == ')') in_switch = 0; continue; }
            // A long first clause is cut at a word once it has FIRST_PART_IDS (see below).
            if (c == ' ' && early_first_clause && s.id_count >= FIRST_PART_IDS && (size_t)(rend - r) >= FIRST_PART_REST) {
                if (lookup(map, ',') && !push_phoneme(&s, map, ',', -1, error, error_size)) { status = -1; break; }
                if ((status = end_sentence(&s, map, &joined, 1, sentence, context, error, error_size)) != 0) break;
                last_word = -1;
                early_first_clause = 0;
                stress_at = -1;
                if (!push_id(&s, map->bos, -1) || (map->has_pad && !push_id(&s, map->pad, -1))) {
                    snprintf(error, error_size, "out of memory");
                    status = -1;
                    break;
                }
                continue;
            }
            int word = -1;
            if (c == 0x2C8 || c == 0x2CC) {
                if (stress_at < 0) stress_at = (int)s.id_count;
            } else if (c != ' ') {
                // Find this phoneme's bytes in the trace: where the cursor is, else a little
                // further (then the words around here are a guess).
                size_t n = (size_t)(r - at), found = (size_t)-1;
                // After an event cut short, a phoneme is the rest of the cut one's name if the
                // trace does not have it next, or has it but then not the phoneme after it,
                // which it has next ("are rain": ɑːɹ ɹˈeɪn, traced ɑː ɹ eɪ n).
                if (cursor < trace.count && trace.bytes[cursor] == CUT_EVENT) {
                    int next = cursor + 1 + n <= trace.count && memcmp(trace.bytes + cursor + 1, at, n) == 0;
                    if (next) {
                        const unsigned char *after = NULL, *after_end = r;
                        while (after_end < rend) {
                            const unsigned char *a = after_end;
                            uint32_t d = next_scalar(&after_end, rend);
                            if (d != ' ' && d != 0x2C8 && d != 0x2CC) { after = a; break; }
                        }
                        size_t m = after ? (size_t)(after_end - after) : 0;
                        // (No phoneme after it: m is 0 and `after` NULL, which memcmp may not be given.)
                        int then_as_next = m > 0 && cursor + 1 + n + m <= trace.count && memcmp(trace.bytes + cursor + 1 + n, after, m) == 0;
                        int then_as_rest = m > 0 && cursor + 1 + m <= trace.count && memcmp(trace.bytes + cursor + 1, after, m) == 0;
                        if (m > 0 && !then_as_next && then_as_rest) next = 0;
                    }
                    if (!next) {
                        word = word_index(&s, &trace, trace.word_of_byte[cursor]);
                        if (word == -2) { snprintf(error, error_size, "out of memory"); status = -1; break; }
                        last_word = word;
                        goto matched;
                    }
                    cursor++;
                }
                for (size_t skip = 0; skip <= 16 && cursor + skip + n <= trace.count; skip++) {
                    if (memcmp(trace.bytes + cursor + skip, at, n) == 0) { found = cursor + skip; break; }
                }
                if (found != (size_t)-1) {
                    if (found != cursor) s.estimated = 1;
                    word = word_index(&s, &trace, trace.word_of_byte[found]);
                    cursor = found + n;
                } else {
                    s.estimated = 1;
                    word = last_word >= 0 && last_word < (int)s.word_count ? last_word : -1;
                }
                if (word == -2) { snprintf(error, error_size, "out of memory"); status = -1; break; }
                last_word = word;
            }
        matched:;
            size_t before = s.id_count;
            if (!push_phoneme(&s, map, c, c == ' ' ? -1 : word, error, error_size)) { status = -1; break; }
            // A phoneme left out gives the word no first id: its next one will.
            if (word >= 0 && s.words[word].first_id < 0 && s.id_count > before) {
                s.words[word].first_id = stress_at >= 0 ? stress_at : (int)before;
            }
            if ((word >= 0 && s.id_count > before) || c == ' ') stress_at = -1;
        }
        if (status != 0) break;
        // The clause's punctuation is a phoneme of its own, when the voice has it.
        if (terminator && lookup(map, terminator) && !push_phoneme(&s, map, terminator, -1, error, error_size)) { status = -1; break; }
        clause = clause_end;
        int clause_only = terminator == 0x2C || terminator == 0x3B || terminator == 0x3A;  // , ; :
        int ends = is_sentence_end(terminator) || !more || s.id_count > 400 || (early_first_clause && clause_only);
        if (ends && s.id_count > 0) {
            int split = early_first_clause && clause_only && !is_sentence_end(terminator) && more;
            status = end_sentence(&s, map, &joined, split, sentence, context, error, error_size);
            last_word = -1;
            early_first_clause = 0;
        }
    }
    for (size_t k = 0; k < clause_count; k++) free(clauses[k].phonemes);
    free(clauses);
    free(padded);
    free(trace.bytes);
    free(trace.word_of_byte);
    free(trace.words);
    free(s.ids);
    free(s.word_of_id);
    free(s.phoneme_of_id);
    free(s.words);
    free(joined.words);
    free(joined.named);
    free(joined.starts);
    return status;
}
