import Synchronization

/// Where Parla's own files are when its code runs inside another program: libparla loaded
/// by Python or a C program, whose executable says nothing about where Parla is installed.
///
/// libparla sets ``libraryDirectory`` to the directory it was loaded from; the engine host
/// and the voice catalog are then also looked for beside it (the wheel's layout) and in
/// `../libexec/parla` and `../share/parla` (an installed prefix).
package enum InstallLocation {
    private static let directory = Mutex<String?>(nil)

    /// The directory of the shared library Parla runs from, nil in a Parla program.
    package static var libraryDirectory: String? {
        get { directory.withLock { $0 } }
        set { directory.withLock { $0 = newValue } }
    }

    /// The places to look for `parla-engine` from the library's directory, in order.
    package static func engineCandidates() -> [String] {
        guard let dir = libraryDirectory else { return [] }
        return [dir + "/parla-engine", dir + "/../libexec/parla/parla-engine"]
    }

    /// The places to look for the voice catalog from the library's directory, in order.
    package static func catalogCandidates() -> [String] {
        guard let dir = libraryDirectory else { return [] }
        return [dir + "/voices", dir + "/../share/parla/voices"]
    }
}
