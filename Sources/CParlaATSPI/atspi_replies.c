// The messages to and from applications on the accessibility bus: the calls Parla makes and
// the replies it reads. Every reply's signature is checked before it is read: applications
// are untrusted (scripts/fuzz atspi runs these parsers on arbitrary messages).
#include "atspi_internal.h"
#include <stdlib.h>
#include <string.h>

ATSPI_INTERNAL void atspi_free_refs(Ref *refs, int n) {
    for (int i = 0; i < n; i++) {
        free(refs[i].bus);
        free(refs[i].path);
    }
    free(refs);
}

/// A method call; NULL only when out of memory.
ATSPI_INTERNAL DBusMessage *atspi_method(const Ref *target, const char *interface, const char *name) {
    return dbus_message_new_method_call(target->bus, target->path, interface, name);
}

/// Appends a copy of (bus, path) to *refs, which holds `count`. 0 when out of memory.
ATSPI_INTERNAL int atspi_push_ref(Ref **refs, int count, const char *bus, const char *path) {
    Ref *grown = realloc(*refs, (size_t)(count + 1) * sizeof **refs);
    if (!grown) return 0;
    *refs = grown;
    grown[count].bus = strdup(bus);
    grown[count].path = strdup(path);
    if (grown[count].bus && grown[count].path) return 1;
    free(grown[count].bus);
    free(grown[count].path);
    return 0;
}

/// The a(so) list in a reply (GetChildren, GetMatches), at most `limit` entries appended to
/// *refs. Returns the new count, or -1 if the reply has another shape.
ATSPI_INTERNAL int atspi_read_refs(DBusMessage *reply, Ref **refs, int count, int limit) {
    if (!reply || !dbus_message_has_signature(reply, "a(so)")) return -1;
    DBusMessageIter it, array, entry;
    dbus_message_iter_init(reply, &it);
    dbus_message_iter_recurse(&it, &array);
    while (dbus_message_iter_get_arg_type(&array) == DBUS_TYPE_STRUCT && count < limit) {
        const char *bus = NULL, *path = NULL;
        dbus_message_iter_recurse(&array, &entry);
        dbus_message_iter_get_basic(&entry, &bus);
        dbus_message_iter_next(&entry);
        dbus_message_iter_get_basic(&entry, &path);
        // The registry lists an application as (its bus name, its root); a null path means none.
        // Names are checked here: libdbus aborts on an invalid one passed to its API.
        if (bus && path && dbus_validate_bus_name(bus, NULL) && dbus_validate_path(path, NULL) &&
            strcmp(path, "/org/a11y/atspi/null") != 0) {
            if (!atspi_push_ref(refs, count, bus, path)) return count;
            count++;
        }
        dbus_message_iter_next(&array);
    }
    return count;
}

/// Whether a GetState reply ("au", a bit set over 64 states) has `state`.
ATSPI_INTERNAL int atspi_has_state(DBusMessage *reply, int state) {
    if (!reply || !dbus_message_has_signature(reply, "au")) return 0;
    DBusMessageIter it, array;
    dbus_message_iter_init(reply, &it);
    dbus_message_iter_recurse(&it, &array);
    for (int word = 0; dbus_message_iter_get_arg_type(&array) == DBUS_TYPE_UINT32; word++) {
        dbus_uint32_t bits = 0;
        dbus_message_iter_get_basic(&array, &bits);
        if (word == state / 32) return (bits >> (state % 32)) & 1;
        dbus_message_iter_next(&array);
    }
    return 0;
}

/// A GetMatches call asking `root` for its focused descendants.
ATSPI_INTERNAL DBusMessage *atspi_focused_query(const Ref *root) {
    DBusMessage *m = atspi_method(root, "org.a11y.atspi.Collection", "GetMatches");
    if (!m) return NULL;
    DBusMessageIter it, rule, array, dict;
    dbus_int32_t states[2] = {1 << ATSPI_STATE_FOCUSED, 0};
    const dbus_int32_t *states_ptr = states;
    dbus_int32_t all = MATCH_ALL, count = 4;
    dbus_bool_t invert = FALSE, traverse = TRUE;
    dbus_uint32_t sort = SORT_ORDER_CANONICAL;
    int ok = 1;
    dbus_message_iter_init_append(m, &it);
    ok &= dbus_message_iter_open_container(&it, DBUS_TYPE_STRUCT, NULL, &rule);
    ok &= dbus_message_iter_open_container(&rule, DBUS_TYPE_ARRAY, "i", &array);
    ok &= dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_INT32, &states_ptr, 2);
    ok &= dbus_message_iter_close_container(&rule, &array);
    ok &= dbus_message_iter_append_basic(&rule, DBUS_TYPE_INT32, &all);
    ok &= dbus_message_iter_open_container(&rule, DBUS_TYPE_ARRAY, "{ss}", &dict);
    ok &= dbus_message_iter_close_container(&rule, &dict);
    ok &= dbus_message_iter_append_basic(&rule, DBUS_TYPE_INT32, &all);
    ok &= dbus_message_iter_open_container(&rule, DBUS_TYPE_ARRAY, "i", &array);
    ok &= dbus_message_iter_close_container(&rule, &array);
    ok &= dbus_message_iter_append_basic(&rule, DBUS_TYPE_INT32, &all);
    ok &= dbus_message_iter_open_container(&rule, DBUS_TYPE_ARRAY, "s", &array);
    ok &= dbus_message_iter_close_container(&rule, &array);
    ok &= dbus_message_iter_append_basic(&rule, DBUS_TYPE_INT32, &all);
    ok &= dbus_message_iter_append_basic(&rule, DBUS_TYPE_BOOLEAN, &invert);
    ok &= dbus_message_iter_close_container(&it, &rule);
    ok &= dbus_message_iter_append_basic(&it, DBUS_TYPE_UINT32, &sort);
    ok &= dbus_message_iter_append_basic(&it, DBUS_TYPE_INT32, &count);
    ok &= dbus_message_iter_append_basic(&it, DBUS_TYPE_BOOLEAN, &traverse);
    if (!ok) {
        dbus_message_unref(m);
        return NULL;
    }
    return m;
}

/// Appends `piece` (and a newline before it if `out` is not empty). 0 when out of memory.
ATSPI_INTERNAL int atspi_append(char **out, size_t *length, const char *piece) {
    size_t n = strlen(piece);
    if (n == 0) return 1;
    size_t extra = n + (*length ? 1 : 0);
    char *grown = realloc(*out, *length + extra + 1);
    if (!grown) return 0;
    *out = grown;
    if (*length) (*out)[(*length)++] = '\n';
    memcpy(*out + *length, piece, n);
    *length += n;
    (*out)[*length] = 0;
    return 1;
}

/// A GetNSelections reply: the count, at most MAX_SELECTIONS; 0 for any other reply.
ATSPI_INTERNAL int atspi_read_selection_count(DBusMessage *reply) {
    dbus_int32_t n = 0;
    if (!reply || !dbus_message_has_signature(reply, "i") ||
        !dbus_message_get_args(reply, NULL, DBUS_TYPE_INT32, &n, DBUS_TYPE_INVALID) || n <= 0) return 0;
    return n > MAX_SELECTIONS ? MAX_SELECTIONS : n;
}

/// A GetSelection reply as a character range: -1 for another shape, 0 for an empty or
/// negative range, 1 with start < end, at most MAX_SELECTION_CHARS long.
ATSPI_INTERNAL int atspi_read_range(DBusMessage *reply, dbus_int32_t *start, dbus_int32_t *end) {
    dbus_int32_t a = 0, b = 0;
    if (!reply || !dbus_message_has_signature(reply, "ii") ||
        !dbus_message_get_args(reply, NULL, DBUS_TYPE_INT32, &a, DBUS_TYPE_INT32, &b, DBUS_TYPE_INVALID)) return -1;
    if (a > b) {
        dbus_int32_t t = a;
        a = b;
        b = t;
    }
    if (a < 0 || b <= a) return 0;
    // b - a cannot overflow (0 <= a < b), nor can a + MAX when b is further than that.
    if (b - a > MAX_SELECTION_CHARS) b = a + MAX_SELECTION_CHARS;
    *start = a;
    *end = b;
    return 1;
}

/// A GetText reply's string (owned by the reply), or NULL for another shape. libdbus has
/// checked that a string argument is valid UTF-8.
ATSPI_INTERNAL const char *atspi_read_string(DBusMessage *reply) {
    const char *piece = NULL;
    if (!reply || !dbus_message_has_signature(reply, "s") ||
        !dbus_message_get_args(reply, NULL, DBUS_TYPE_STRING, &piece, DBUS_TYPE_INVALID)) return NULL;
    return piece;
}

ATSPI_INTERNAL DBusMessage *atspi_children_query(const Ref *r) { return atspi_method(r, "org.a11y.atspi.Accessible", "GetChildren"); }

ATSPI_INTERNAL DBusMessage *atspi_state_query(const Ref *r) { return atspi_method(r, "org.a11y.atspi.Accessible", "GetState"); }

#ifdef PARLA_ATSPI_FUZZ
// libFuzzer target (scripts/fuzz atspi): what an application on the accessibility bus can
// send back. The input is a marshalled D-Bus message (libdbus validates it, as it does every
// message off the wire); each reply parser is run on it, as if it answered each call.
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    DBusMessage *reply = dbus_message_demarshal((const char *)data, (int)size, NULL);
    if (!reply) return 0;
    Ref *refs = NULL;
    int n = atspi_read_refs(reply, &refs, 0, MAX_OBJECTS);
    for (int i = 0; i < n; i++) {
        // What the lookup does next with each reference: address a call to it.
        DBusMessage *next = atspi_children_query(&refs[i]);
        if (next) dbus_message_unref(next);
        next = atspi_focused_query(&refs[i]);
        if (next) dbus_message_unref(next);
    }
    if (refs) atspi_free_refs(refs, n > 0 ? n : 0);
    (void)atspi_has_state(reply, ATSPI_STATE_ACTIVE);
    (void)atspi_has_state(reply, 63);
    (void)atspi_read_selection_count(reply);
    dbus_int32_t start = 0, end = 0;
    if (atspi_read_range(reply, &start, &end) == 1 && (start < 0 || end <= start || end - start > MAX_SELECTION_CHARS)) __builtin_trap();
    const char *piece = atspi_read_string(reply);
    if (piece) {
        char *out = NULL;
        size_t length = 0;
        if (atspi_append(&out, &length, piece) && atspi_append(&out, &length, piece) && strlen(out) != length) __builtin_trap();
        free(out);
    }
    dbus_message_unref(reply);
    return 0;
}
#endif
