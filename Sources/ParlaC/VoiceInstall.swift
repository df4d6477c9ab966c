import CParlaAPI
#if canImport(Glibc)
    import Glibc
#endif
import ParlaCore
import ParlaIO

// MARK: Installing voices

/// `error` as a status: a name the catalog lacks, or a voice that is not installed, is
/// PARLA_ERROR_UNKNOWN_VOICE; the rest (network, catalog, checksum, disk, lock) PARLA_ERROR_IO.
private func fail(_ error: VoiceInstallError) -> parla_status {
    switch error {
    case .unknownVoice, .notInstalled: return fail(PARLA_ERROR_UNKNOWN_VOICE, error.description)
    default: return fail(PARLA_ERROR_IO, error.description)
    }
}

@_cdecl("parla_install_voice")
public func parlaInstallVoice(
    _ name: UnsafePointer<CChar>?, _ catalog: UnsafePointer<CChar>?, _ progress: parla_install_progress?,
    _ userData: UnsafeMutableRawPointer?
) -> parla_status {
    guard let name = string(name, "name") else { return name == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8 }
    var root: String?
    if let catalog {
        guard let text = string(catalog, "catalog") else { return PARLA_ERROR_INVALID_UTF8 }
        root = text
    }
    guard let directory = PiperVoiceInstaller.userDirectory else {
        return fail(PARLA_ERROR_IO, "neither XDG_DATA_HOME nor HOME is set: set one to say where voices go")
    }
    let installer = PiperVoiceInstaller(directory: directory)
    if let code = AtomicFile.makeDirectories(directory) {
        return fail(PARLA_ERROR_IO, "cannot create \(directory): \(String(cString: strerror(code)))")
    }
    do throws(VoiceInstallError) {
        let index = try PiperVoiceIndex.load(root: PiperVoiceIndex.root(root), scratch: directory)
        let voice = try index.voice(named: name)
        var file = "", total: Int64 = 0
        try installer.install(voice, from: index) { event in
            guard let progress else { return }
            switch event {
            case .fileStarted(let name, let size, let resumedAt):
                file = name
                total = size
                name.withCString { progress($0, resumedAt, size, userData) }
            case .bytes(let bytes): file.withCString { progress($0, bytes, total, userData) }
            case .fileChecked(let name, let size): name.withCString { progress($0, size, size, userData) }
            case .installed, .alreadyInstalled: break
            }
        }
        return succeed()
    } catch {
        return fail(error)
    }
}

@_cdecl("parla_remove_voice")
public func parlaRemoveVoice(_ name: UnsafePointer<CChar>?) -> parla_status {
    guard let name = string(name, "name") else { return name == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8 }
    guard let directory = PiperVoiceInstaller.userDirectory else {
        return fail(PARLA_ERROR_IO, "neither XDG_DATA_HOME nor HOME is set")
    }
    do throws(VoiceInstallError) {
        _ = try PiperVoiceInstaller(directory: directory).remove(name, elsewhere: VoiceCatalog.piperVoiceDirectories)
        return succeed()
    } catch {
        return fail(error)
    }
}
