// Writes the seed corpus of the atspi fuzzer (Tests/Fuzz/corpus/atspi): marshalled replies of
// the shapes the AT-SPI lookup reads. Run once by hand when the shapes change:
//   cc Tests/Fuzz/Targets/atspi_seeds.c $(pkg-config --cflags --libs dbus-1) -o /tmp/seeds &&
//   /tmp/seeds Tests/Fuzz/corpus/atspi
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>

static DBusMessage *reply(void) {
    DBusMessage *m = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN);
    dbus_message_set_serial(m, 9);
    dbus_message_set_reply_serial(m, 7);
    dbus_message_set_sender(m, ":1.42");
    return m;
}

static void save(const char *dir, const char *name, DBusMessage *m) {
    char *bytes = NULL;
    int length = 0;
    if (!dbus_message_marshal(m, &bytes, &length)) exit(1);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) exit(1);
    fwrite(bytes, 1, (size_t)length, f);
    fclose(f);
    dbus_free(bytes);
    dbus_message_unref(m);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *dir = argv[1];
    DBusMessage *m = reply();
    DBusMessageIter it, array, entry;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "(so)", &array);
    const char *names[] = {":1.5", "org.a11y.atspi.Registry", ":1.7"};
    const char *paths[] = {"/org/a11y/atspi/accessible/root", "/org/a11y/atspi/null", "/org/a11y/atspi/accessible/12"};
    for (int i = 0; i < 3; i++) {
        dbus_message_iter_open_container(&array, DBUS_TYPE_STRUCT, NULL, &entry);
        dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &names[i]);
        dbus_message_iter_append_basic(&entry, DBUS_TYPE_OBJECT_PATH, &paths[i]);
        dbus_message_iter_close_container(&array, &entry);
    }
    dbus_message_iter_close_container(&it, &array);
    save(dir, "children", m);

    m = reply();
    dbus_uint32_t states[2] = {1126170882u, 0};
    const dbus_uint32_t *p = states;
    dbus_message_iter_init_append(m, &it);
    dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "u", &array);
    dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_UINT32, &p, 2);
    dbus_message_iter_close_container(&it, &array);
    save(dir, "state", m);

    m = reply();
    dbus_int32_t n = 2;
    dbus_message_append_args(m, DBUS_TYPE_INT32, &n, DBUS_TYPE_INVALID);
    save(dir, "nselections", m);

    m = reply();
    dbus_int32_t start = 13, end = 28;
    dbus_message_append_args(m, DBUS_TYPE_INT32, &start, DBUS_TYPE_INT32, &end, DBUS_TYPE_INVALID);
    save(dir, "selection", m);

    m = reply();
    const char *text = "Καλημέρα κόσμε. \xef\xbf\xbc 👍🏽";
    dbus_message_append_args(m, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
    save(dir, "text", m);
    return 0;
}
