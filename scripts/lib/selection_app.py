"""A GTK 3 window whose text view shows TEXT with characters START..END selected and focused:
the application whose selection speak-selection reads over AT-SPI in the tests and benchmarks.
Run with Debian's /usr/bin/python3 (python3-gi, gir1.2-gtk-3.0).

    selection_app.py TEXT START END
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

text, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
window = Gtk.Window(title="Parla selection test")
view = Gtk.TextView()
view.get_buffer().set_text(text)
window.add(view)
window.connect("destroy", Gtk.main_quit)
window.show_all()


def select():
    buffer = view.get_buffer()
    view.grab_focus()
    buffer.select_range(buffer.get_iter_at_offset(start), buffer.get_iter_at_offset(end))
    window.present()
    return False


GLib.timeout_add(200, select)
Gtk.main()
