#ifndef PARLA_ATSPI_H
#define PARLA_ATSPI_H

#include <stddef.h>

/// What parla_atspi_selection found.
enum {
    /// The focused object's selected text is in *text.
    PARLA_ATSPI_TEXT = 1,
    /// The accessibility bus answered, and nothing focused has selected text.
    PARLA_ATSPI_NOTHING = 0,
    /// There is no accessibility bus to ask (no session bus, or no AT-SPI on it).
    PARLA_ATSPI_UNAVAILABLE = 2,
    /// The bus or an application failed or did not answer in time; why is in `reason`.
    PARLA_ATSPI_FAILED = -1,
};

/// Reads the selected text of the focused accessible object through AT-SPI, the way a screen
/// reader does: the active window of each application on the accessibility bus, its focused
/// descendant (Collection.GetMatches), then that object's Text selections. Every D-Bus call
/// shares one deadline, `timeout_ms` from now, so an application that hangs costs at most that.
///
/// On PARLA_ATSPI_TEXT, *text is a malloc'd UTF-8 string (several selections joined by
/// newlines) the caller frees. `reason` (may be NULL) receives a one-line explanation for the
/// other results.
int parla_atspi_selection(int timeout_ms, char **text, char *reason, size_t reason_size);

#endif
