#ifndef PARLA_ATSPI_INTERNAL_H
#define PARLA_ATSPI_INTERNAL_H
// What atspi_selection.c (the lookup) and atspi_replies.c (the messages to and from
// applications, which the atspi fuzz target runs on) share. Not part of the module's API.
#include "parla_lazy_dbus.h"
#include <stddef.h>
#include <stdint.h>

/// Hidden: visible to the module's other file only.
#define ATSPI_INTERNAL __attribute__((visibility("hidden")))

#define ATSPI_STATE_ACTIVE 1
#define ATSPI_STATE_FOCUSED 12
#define MATCH_ALL 1
#define SORT_ORDER_CANONICAL 1
/// At most this many applications, windows and selections are looked at.
#define MAX_OBJECTS 256
#define MAX_SELECTIONS 16
/// A selection longer than this (in characters) is cut: it is not something to read aloud.
#define MAX_SELECTION_CHARS (1 << 20)

typedef struct {
    char *bus;
    char *path;
} Ref;

typedef struct {
    uint64_t deadline;
    char *reason;
    size_t reason_size;
    /// The last call failed because its service does not exist (no AT-SPI installed).
    int service_unknown;
} Lookup;

ATSPI_INTERNAL void atspi_free_refs(Ref *refs, int n);

/// A method call; NULL only when out of memory.
ATSPI_INTERNAL DBusMessage *atspi_method(const Ref *target, const char *interface, const char *name);

/// Appends a copy of (bus, path) to *refs, which holds `count`. 0 when out of memory.
ATSPI_INTERNAL int atspi_push_ref(Ref **refs, int count, const char *bus, const char *path);

/// The a(so) list in a reply (GetChildren, GetMatches), at most `limit` entries appended to
/// *refs. Returns the new count, or -1 if the reply has another shape.
ATSPI_INTERNAL int atspi_read_refs(DBusMessage *reply, Ref **refs, int count, int limit);

/// Whether a GetState reply ("au", a bit set over 64 states) has `state`.
ATSPI_INTERNAL int atspi_has_state(DBusMessage *reply, int state);

/// A GetMatches call asking `root` for its focused descendants.
ATSPI_INTERNAL DBusMessage *atspi_focused_query(const Ref *root);

/// Appends `piece` (and a newline before it if `out` is not empty). 0 when out of memory.
ATSPI_INTERNAL int atspi_append(char **out, size_t *length, const char *piece);

/// A GetNSelections reply: the count, at most MAX_SELECTIONS; 0 for any other reply.
ATSPI_INTERNAL int atspi_read_selection_count(DBusMessage *reply);

/// A GetSelection reply as a character range: -1 for another shape, 0 for an empty or
/// negative range, 1 with start < end, at most MAX_SELECTION_CHARS long.
ATSPI_INTERNAL int atspi_read_range(DBusMessage *reply, dbus_int32_t *start, dbus_int32_t *end);

/// A GetText reply's string (owned by the reply), or NULL for another shape. libdbus has
/// checked that a string argument is valid UTF-8.
ATSPI_INTERNAL const char *atspi_read_string(DBusMessage *reply);

ATSPI_INTERNAL DBusMessage *atspi_children_query(const Ref *r);

ATSPI_INTERNAL DBusMessage *atspi_state_query(const Ref *r);
#endif
