import CParlaATSPI
#if canImport(Glibc)
    import Glibc
#endif

/// The selection of the focused application, read over the AT-SPI accessibility bus the way
/// Orca reads it (see `parla_atspi.h`): GTK, Qt, Firefox, Chromium and LibreOffice expose it on
/// X11 and on every Wayland compositor, with no focus stealing.
enum Accessibility {
    enum Answer: Equatable {
        /// The selected text.
        case text(String)
        /// The bus answered and nothing focused has selected text.
        case nothing(String)
        /// There is no accessibility bus here.
        case unavailable(String)
        /// The bus or an application failed or did not answer in time.
        case failed(String)
    }

    static func selection(timeoutMilliseconds: Int) -> Answer {
        var text: UnsafeMutablePointer<CChar>?
        var reason = [CChar](repeating: 0, count: 512)
        let code = parla_atspi_selection(Int32(clamping: timeoutMilliseconds), &text, &reason, reason.count)
        let why = String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch code {
        case Int32(PARLA_ATSPI_TEXT):
            guard let text else { return .nothing(why) }
            defer { free(text) }
            // Embedded objects (links, images) appear as U+FFFC in a hypertext's text.
            return .text(String(cString: text).filter { $0 != "\u{FFFC}" })
        case Int32(PARLA_ATSPI_NOTHING):
            return .nothing(why)
        case Int32(PARLA_ATSPI_UNAVAILABLE):
            return .unavailable(why)
        default:
            return .failed(why.isEmpty ? "failed" : why)
        }
    }
}
