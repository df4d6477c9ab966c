// The selection of the focused application, read over the AT-SPI accessibility bus with
// libdbus (already loaded by libpulse, so this costs no new library). Every call has a deadline,
// and every reply's signature is checked before it is read: applications are untrusted.

#include "parla_atspi.h"

#include "atspi_internal.h"
#include "parla_lazy_dbus.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/// Milliseconds left before the deadline, at least 1 (libdbus treats 0 as "now" inconsistently).
static int remaining(const Lookup *l) {
    uint64_t now = now_ms();
    if (now >= l->deadline) return 0;
    uint64_t r = l->deadline - now;
    return r > 60000 ? 60000 : (int)r;
}

static void say(Lookup *l, const char *format, ...) {
    if (!l->reason || l->reason_size == 0) return;
    va_list args;
    va_start(args, format);
    vsnprintf(l->reason, l->reason_size, format, args);
    va_end(args);
}

/// Sends every message (consumed) and waits for all the replies until the deadline. A reply
/// slot is NULL when nothing usable came back (an error, a timeout, no memory).
static void call_all(DBusConnection *c, DBusMessage **messages, int n, DBusMessage **replies, Lookup *l) {
    DBusPendingCall **pending = calloc((size_t)(n > 0 ? n : 1), sizeof *pending);
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
        int ms = remaining(l);
        if (pending && messages[i] && ms > 0) {
            if (!dbus_connection_send_with_reply(c, messages[i], &pending[i], ms)) pending[i] = NULL;
        }
        if (messages[i]) dbus_message_unref(messages[i]);
        messages[i] = NULL;
    }
    if (!pending) return;
    dbus_connection_flush(c);
    for (int i = 0; i < n; i++) {
        if (!pending[i]) continue;
        dbus_pending_call_block(pending[i]);
        DBusMessage *reply = dbus_pending_call_steal_reply(pending[i]);
        dbus_pending_call_unref(pending[i]);
        if (reply && dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_METHOD_RETURN) {
            replies[i] = reply;
        } else if (reply) {
            const char *error = dbus_message_get_error_name(reply);
            if (error && strcmp(error, DBUS_ERROR_NO_REPLY) == 0) say(l, "an application did not answer in time");
            dbus_message_unref(reply);
        }
    }
    free(pending);
}

/// One call; NULL (with `reason` set) on an error or timeout.
static DBusMessage *call(DBusConnection *c, DBusMessage *message, Lookup *l, const char *what) {
    if (!message) return NULL;
    int ms = remaining(l);
    if (ms <= 0) {
        dbus_message_unref(message);
        say(l, "%s did not answer in time", what);
        return NULL;
    }
    DBusError e;
    dbus_error_init(&e);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(c, message, ms, &e);
    dbus_message_unref(message);
    l->service_unknown = 0;
    if (!reply) {
        if (e.name && strcmp(e.name, DBUS_ERROR_SERVICE_UNKNOWN) == 0) l->service_unknown = 1;
        if (e.name && strcmp(e.name, DBUS_ERROR_NO_REPLY) == 0) {
            say(l, "%s did not answer in time", what);
        } else {
            say(l, "%s: %s", what, e.message ? e.message : "failed");
        }
        dbus_error_free(&e);
    }
    return reply;
}

/// Opens a private connection and says Hello, within the deadline. NULL with `reason` set.
static DBusConnection *open_bus(const char *address, Lookup *l, const char *what) {
    DBusError e;
    dbus_error_init(&e);
    DBusConnection *c = dbus_connection_open_private(address, &e);
    if (!c) {
        say(l, "cannot connect to the %s: %s", what, e.message ? e.message : "failed");
        dbus_error_free(&e);
        return NULL;
    }
    dbus_connection_set_exit_on_disconnect(c, FALSE);
    DBusMessage *hello = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "Hello");
    DBusMessage *reply = call(c, hello, l, what);
    const char *name = NULL;
    if (!reply || !dbus_message_has_signature(reply, "s") ||
        !dbus_message_get_args(reply, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID) ||
        !dbus_bus_set_unique_name(c, name)) {
        if (reply) say(l, "the %s did not accept us", what);
        if (reply) dbus_message_unref(reply);
        dbus_connection_close(c);
        dbus_connection_unref(c);
        return NULL;
    }
    dbus_message_unref(reply);
    return c;
}

/// The address of the accessibility bus: $AT_SPI_BUS_ADDRESS, else what org.a11y.Bus on the
/// session bus says. NULL (reason set) when there is none; *unavailable says whether that is
/// "no AT-SPI here" rather than a failure.
static char *accessibility_bus(Lookup *l, int *unavailable) {
    const char *direct = getenv("AT_SPI_BUS_ADDRESS");
    if (direct && direct[0]) return strdup(direct);
    *unavailable = 1;
    char fallback[512];
    const char *session = getenv("DBUS_SESSION_BUS_ADDRESS");
    if (!session || !session[0]) {
        const char *runtime = getenv("XDG_RUNTIME_DIR");
        struct stat st;
        if (!runtime || !runtime[0]) {
            say(l, "no session bus (DBUS_SESSION_BUS_ADDRESS is unset)");
            return NULL;
        }
        snprintf(fallback, sizeof fallback, "%s/bus", runtime);
        if (stat(fallback, &st) != 0) {
            say(l, "no session bus (DBUS_SESSION_BUS_ADDRESS is unset)");
            return NULL;
        }
        snprintf(fallback, sizeof fallback, "unix:path=%s/bus", runtime);
        session = fallback;
    }
    // Never let libdbus start a bus of its own.
    if (strncmp(session, "autolaunch:", 11) == 0) {
        say(l, "no session bus (DBUS_SESSION_BUS_ADDRESS is %s)", session);
        return NULL;
    }
    DBusConnection *c = open_bus(session, l, "session bus");
    if (!c) return NULL;
    Ref bus = {"org.a11y.Bus", "/org/a11y/bus"};
    DBusMessage *reply = call(c, atspi_method(&bus, "org.a11y.Bus", "GetAddress"), l, "the accessibility bus launcher");
    char *address = NULL;
    const char *value = NULL;
    if (reply && dbus_message_has_signature(reply, "s") &&
        dbus_message_get_args(reply, NULL, DBUS_TYPE_STRING, &value, DBUS_TYPE_INVALID) && value && value[0]) {
        address = strdup(value);
    } else if (reply) {
        say(l, "the accessibility bus launcher gave no address");
    } else if (!l->service_unknown) {
        *unavailable = 0;  // it exists and failed, or hung (not installed: unavailable)
    }
    if (reply) dbus_message_unref(reply);
    dbus_connection_close(c);
    dbus_connection_unref(c);
    if (address) *unavailable = 0;
    return address;
}

/// The selected text of `object`: 1 with *text set, 0 when it has none (or no Text interface).
static int selected_text(DBusConnection *c, const Ref *object, char **text, Lookup *l) {
    DBusMessage *reply = call(c, atspi_method(object, "org.a11y.atspi.Text", "GetNSelections"), l, "the focused application");
    dbus_int32_t n = atspi_read_selection_count(reply);
    if (reply) dbus_message_unref(reply);
    if (n == 0) return 0;
    char *out = NULL;
    size_t length = 0;
    for (dbus_int32_t i = 0; i < n; i++) {
        DBusMessage *m = atspi_method(object, "org.a11y.atspi.Text", "GetSelection");
        if (!m || !dbus_message_append_args(m, DBUS_TYPE_INT32, &i, DBUS_TYPE_INVALID)) {
            if (m) dbus_message_unref(m);
            break;
        }
        reply = call(c, m, l, "the focused application");
        dbus_int32_t start = 0, end = 0;
        int range = atspi_read_range(reply, &start, &end);
        if (reply) dbus_message_unref(reply);
        if (range < 0) break;
        if (range == 0) continue;
        m = atspi_method(object, "org.a11y.atspi.Text", "GetText");
        if (!m || !dbus_message_append_args(m, DBUS_TYPE_INT32, &start, DBUS_TYPE_INT32, &end, DBUS_TYPE_INVALID)) {
            if (m) dbus_message_unref(m);
            break;
        }
        reply = call(c, m, l, "the focused application");
        const char *piece = atspi_read_string(reply);
        if (piece) {
            if (!atspi_append(&out, &length, piece)) {
                dbus_message_unref(reply);
                break;
            }
        }
        if (reply) dbus_message_unref(reply);
    }
    if (!out) return 0;
    *text = out;
    return 1;
}

/// Sends `make(ref)` to every ref and returns the replies (NULL slots for failures).
static DBusMessage **ask_all(DBusConnection *c, const Ref *refs, int n, DBusMessage *(*make)(const Ref *), Lookup *l) {
    DBusMessage **messages = calloc((size_t)(n > 0 ? n : 1), sizeof *messages);
    DBusMessage **replies = calloc((size_t)(n > 0 ? n : 1), sizeof *replies);
    if (!messages || !replies) {
        free(messages);
        free(replies);
        return NULL;
    }
    for (int i = 0; i < n; i++) messages[i] = make(&refs[i]);
    call_all(c, messages, n, replies, l);
    free(messages);
    return replies;
}

static void free_replies(DBusMessage **replies, int n) {
    if (!replies) return;
    for (int i = 0; i < n; i++)
        if (replies[i]) dbus_message_unref(replies[i]);
    free(replies);
}

/// The references in all `n` replies (a(so) each, others skipped) appended to *refs, which
/// holds `count`; the replies are freed. Returns the new count.
static int collect_refs(DBusMessage **replies, int n, Ref **refs, int count) {
    for (int i = 0; i < n; i++) {
        int got = atspi_read_refs(replies[i], refs, count, MAX_OBJECTS);
        if (got > count) count = got;
    }
    free_replies(replies, n);
    return count;
}

static int lookup(int timeout_ms, char **text, char *reason, size_t reason_size) {
    Lookup l = {now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1), reason, reason_size, 0};
    if (reason && reason_size) reason[0] = 0;
    *text = NULL;
    int unavailable = 0;
    char *address = accessibility_bus(&l, &unavailable);
    if (!address) return unavailable ? PARLA_ATSPI_UNAVAILABLE : PARLA_ATSPI_FAILED;
    DBusConnection *c = open_bus(address, &l, "accessibility bus");
    free(address);
    if (!c) return PARLA_ATSPI_FAILED;

    int result = PARLA_ATSPI_NOTHING;
    Ref root = {"org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root"};
    Ref *apps = NULL, *windows = NULL, *active = NULL, *focused = NULL;
    int napps = 0, nwindows = 0, nactive = 0, nfocused = 0;
    DBusMessage **replies = NULL;

    DBusMessage *reply = call(c, atspi_children_query(&root), &l, "the accessibility registry");
    if (!reply) {
        result = PARLA_ATSPI_FAILED;
        goto done;
    }
    napps = atspi_read_refs(reply, &apps, 0, MAX_OBJECTS);
    dbus_message_unref(reply);
    if (napps <= 0) {
        say(&l, "no application is on the accessibility bus");
        result = PARLA_ATSPI_UNAVAILABLE;
        goto done;
    }
    // Every application's windows, then every window's state, each round asked all at once.
    replies = ask_all(c, apps, napps, atspi_children_query, &l);
    if (!replies) goto done;
    nwindows = collect_refs(replies, napps, &windows, 0);
    replies = ask_all(c, windows, nwindows, atspi_state_query, &l);
    if (!replies) goto done;
    for (int i = 0; i < nwindows; i++) {
        if (!atspi_has_state(replies[i], ATSPI_STATE_ACTIVE)) continue;
        if (!atspi_push_ref(&active, nactive, windows[i].bus, windows[i].path)) break;
        nactive++;
    }
    free_replies(replies, nwindows);
    replies = NULL;
    if (nactive == 0) {
        if (remaining(&l) == 0) {
            say(&l, "the applications did not answer in time");
            result = PARLA_ATSPI_FAILED;
        } else {
            say(&l, "no active window is on the accessibility bus");
        }
        goto done;
    }
    replies = ask_all(c, active, nactive, atspi_focused_query, &l);
    if (!replies) goto done;
    nfocused = collect_refs(replies, nactive, &focused, 0);
    replies = NULL;
    for (int i = 0; i < nfocused && result == PARLA_ATSPI_NOTHING; i++) {
        if (selected_text(c, &focused[i], text, &l)) result = PARLA_ATSPI_TEXT;
    }
    if (result == PARLA_ATSPI_NOTHING) {
        if (remaining(&l) == 0) {
            say(&l, "the focused application did not answer in time");
            result = PARLA_ATSPI_FAILED;
        } else if (nfocused == 0) {
            say(&l, "nothing in the active window has the focus");
        } else {
            say(&l, "the focused object has no selected text");
        }
    }
done:
    if (apps) atspi_free_refs(apps, napps > 0 ? napps : 0);
    if (windows) atspi_free_refs(windows, nwindows);
    if (active) atspi_free_refs(active, nactive);
    if (focused) atspi_free_refs(focused, nfocused);
    dbus_connection_close(c);
    dbus_connection_unref(c);
    return result;
}

// libdbus waits without a timeout while it authenticates a new connection, so a bus that
// accepts the connection and then says nothing (a wedged session) would hold the caller
// forever. The lookup therefore runs on a thread of its own; the caller waits for it until the
// deadline and then gives up on it. The thread finishes, or stays blocked until the process
// exits; whichever of the two lets go of the job last frees it.

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t done_changed;
    int done, references, timeout_ms, result;
    char *text;
    char reason[512];
} Job;

static void release(Job *job) {
    pthread_mutex_lock(&job->mutex);
    int last = --job->references == 0;
    pthread_mutex_unlock(&job->mutex);
    if (!last) return;
    free(job->text);
    pthread_cond_destroy(&job->done_changed);
    pthread_mutex_destroy(&job->mutex);
    free(job);
}

static void *run_job(void *argument) {
    Job *job = argument;
    char *text = NULL;
    char reason[sizeof job->reason];
    reason[0] = 0;
    int result = lookup(job->timeout_ms, &text, reason, sizeof reason);
    pthread_mutex_lock(&job->mutex);
    job->result = result;
    job->text = text;
    memcpy(job->reason, reason, sizeof reason);
    job->done = 1;
    pthread_cond_signal(&job->done_changed);
    pthread_mutex_unlock(&job->mutex);
    release(job);
    return NULL;
}

int parla_atspi_selection(int timeout_ms, char **text, char *reason, size_t reason_size) {
    *text = NULL;
    if (reason && reason_size) reason[0] = 0;
    if (timeout_ms < 1) timeout_ms = 1;
    // libdbus-1 is loaded on first use (CDBusLazy), here, before the deadline starts: loading
    // is this machine's work, not the bus's (under load it took longer than the whole wait).
    if (!parla_dbus_load()) {
        if (reason && reason_size) snprintf(reason, reason_size, "libdbus-1 could not be loaded: %s", parla_dbus_load_error());
        return PARLA_ATSPI_UNAVAILABLE;
    }
    Job *job = calloc(1, sizeof *job);
    if (!job) return PARLA_ATSPI_FAILED;
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&job->done_changed, &attributes);
    pthread_condattr_destroy(&attributes);
    pthread_mutex_init(&job->mutex, NULL);
    job->references = 2;
    job->timeout_ms = timeout_ms;
    pthread_attr_t thread_attributes;
    pthread_attr_init(&thread_attributes);
    pthread_attr_setdetachstate(&thread_attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    if (pthread_create(&thread, &thread_attributes, run_job, job) != 0) {
        pthread_attr_destroy(&thread_attributes);
        job->references = 1;
        release(job);
        if (reason && reason_size) snprintf(reason, reason_size, "cannot start a thread");
        return PARLA_ATSPI_FAILED;
    }
    pthread_attr_destroy(&thread_attributes);
    // The lookup's own calls time out at the same deadline.
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = (long long)until.tv_nsec + (long long)timeout_ms * 1000000LL;
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    int result = PARLA_ATSPI_FAILED;
    pthread_mutex_lock(&job->mutex);
    while (!job->done) {
        if (pthread_cond_timedwait(&job->done_changed, &job->mutex, &until) != 0 && !job->done) break;
    }
    if (job->done) {
        result = job->result;
        *text = job->text;
        job->text = NULL;
        if (reason && reason_size) snprintf(reason, reason_size, "%s", job->reason);
    } else if (reason && reason_size) {
        snprintf(reason, reason_size, "the accessibility bus did not answer within %d ms", timeout_ms);
    }
    pthread_mutex_unlock(&job->mutex);
    release(job);
    return result;
}

