import CParlaAPI
#if canImport(Glibc)
    import Glibc
#endif
import Parla
import ParlaCore
import Synchronization

/// A parla_utterance: an `Utterance` and how it is to be scheduled.
final class UtteranceBox: Sendable {
    struct Settings: Sendable {
        var utterance: Utterance
        var priority: AnnouncementPriority?
        var queued = false
    }
    let settings: Mutex<Settings>

    init(_ utterance: Utterance) { settings = Mutex(Settings(utterance: utterance)) }
}

func utteranceBox(_ handle: OpaquePointer?) -> UtteranceBox? {
    guard let box = HandleTable.shared.get(handle, as: UtteranceBox.self) else {
        _ = fail(PARLA_ERROR_INVALID_HANDLE, handle == nil ? "the utterance is NULL" : "the utterance was freed, or is not one")
        return nil
    }
    return box
}

@_cdecl("parla_utterance_new")
public func parlaUtteranceNew(_ text: UnsafePointer<CChar>?) -> OpaquePointer? {
    guard let text = string(text, "the text") else { return nil }
    _ = succeed()
    return HandleTable.shared.add(UtteranceBox(Utterance(string: text)))
}

@_cdecl("parla_utterance_new_ssml")
public func parlaUtteranceNewSSML(_ ssml: UnsafePointer<CChar>?) -> OpaquePointer? {
    guard let ssml = string(ssml, "the SSML") else { return nil }
    do throws(ParlaError) {
        let utterance = try Utterance(ssml: ssml)
        _ = succeed()
        return HandleTable.shared.add(UtteranceBox(utterance))
    } catch {
        _ = fail(error)
        return nil
    }
}

@_cdecl("parla_utterance_free")
public func parlaUtteranceFree(_ handle: OpaquePointer?) {
    _ = HandleTable.shared.remove(handle, as: UtteranceBox.self)
}

/// Applies `change` to the utterance of `handle`.
private func update(_ handle: OpaquePointer?, _ change: (inout UtteranceBox.Settings) -> Void) -> parla_status {
    guard let box = utteranceBox(handle) else { return PARLA_ERROR_INVALID_HANDLE }
    box.settings.withLock { change(&$0) }
    return succeed()
}

@_cdecl("parla_utterance_set_language")
public func parlaUtteranceSetLanguage(_ handle: OpaquePointer?, _ language: UnsafePointer<CChar>?) -> parla_status {
    guard utteranceBox(handle) != nil else { return PARLA_ERROR_INVALID_HANDLE }
    guard let language else { return update(handle) { $0.utterance.language = nil } }
    guard let text = string(language, "the language") else { return PARLA_ERROR_INVALID_UTF8 }
    do throws(ParlaError) {
        let tag = try LanguageTag(parsing: text)
        return update(handle) { $0.utterance.language = tag }
    } catch {
        return fail(PARLA_ERROR_UNKNOWN_LANGUAGE, error.description)
    }
}

@_cdecl("parla_utterance_set_voice")
public func parlaUtteranceSetVoice(_ handle: OpaquePointer?, _ voice: UnsafePointer<CChar>?) -> parla_status {
    guard utteranceBox(handle) != nil else { return PARLA_ERROR_INVALID_HANDLE }
    guard let voice else { return update(handle) { $0.utterance.voice = nil } }
    guard let identifier = string(voice, "the voice") else { return PARLA_ERROR_INVALID_UTF8 }
    guard let found = SpeechVoice(identifier: identifier) else {
        return fail(PARLA_ERROR_UNKNOWN_VOICE, "no voice '\(identifier)': parla_voices() lists the installed ones")
    }
    return update(handle) { $0.utterance.voice = found }
}

@_cdecl("parla_utterance_prefer_voice")
public func parlaUtterancePreferVoice(
    _ handle: OpaquePointer?, _ language: UnsafePointer<CChar>?, _ voice: UnsafePointer<CChar>?
) -> parla_status {
    guard utteranceBox(handle) != nil else { return PARLA_ERROR_INVALID_HANDLE }
    guard let text = string(language, "the language") else {
        return language == nil ? PARLA_ERROR_INVALID_ARGUMENT : PARLA_ERROR_INVALID_UTF8
    }
    let tag: LanguageTag
    do throws(ParlaError) {
        tag = try LanguageTag(parsing: text)
    } catch {
        return fail(PARLA_ERROR_UNKNOWN_LANGUAGE, error.description)
    }
    guard let voice else { return update(handle) { $0.utterance.preferredVoices[tag] = nil } }
    guard let identifier = string(voice, "the voice") else { return PARLA_ERROR_INVALID_UTF8 }
    guard let found = SpeechVoice(identifier: identifier) else {
        return fail(PARLA_ERROR_UNKNOWN_VOICE, "no voice '\(identifier)': parla_voices() lists the installed ones")
    }
    guard found.speaks(tag) else {
        return fail(PARLA_ERROR_INVALID_ARGUMENT, "the voice '\(identifier)' does not speak '\(tag)'")
    }
    return update(handle) { $0.utterance.preferredVoices[tag] = found }
}

/// Sets a value that must lie in `range` (a rate, a pitch, a volume).
private func setChecked(
    _ handle: OpaquePointer?, _ value: Double, _ name: String, _ range: ClosedRange<Double>,
    _ apply: @escaping (inout Utterance, Double) -> Void
) -> parla_status {
    guard utteranceBox(handle) != nil else { return PARLA_ERROR_INVALID_HANDLE }
    guard let value = checked(value, name, range) else { return PARLA_ERROR_OUT_OF_RANGE }
    return update(handle) { apply(&$0.utterance, value) }
}

@_cdecl("parla_utterance_set_rate")
public func parlaUtteranceSetRate(_ handle: OpaquePointer?, _ rate: Double) -> parla_status {
    setChecked(handle, rate, "rate", SpeechPlan.rateMultiplierRange) { $0.rate = $1 }
}

@_cdecl("parla_utterance_set_pitch")
public func parlaUtteranceSetPitch(_ handle: OpaquePointer?, _ pitch: Double) -> parla_status {
    setChecked(handle, pitch, "pitch", SpeechPlan.pitchRange) { $0.pitch = $1 }
}

@_cdecl("parla_utterance_set_volume")
public func parlaUtteranceSetVolume(_ handle: OpaquePointer?, _ volume: Double) -> parla_status {
    setChecked(handle, volume, "volume", SpeechPlan.volumeRange) { $0.volume = $1 }
}

@_cdecl("parla_utterance_set_resumes_after_interruption")
public func parlaUtteranceSetResumes(_ handle: OpaquePointer?, _ resumes: Int32) -> parla_status {
    update(handle) { $0.utterance.resumesAfterInterruption = resumes != 0 }
}

/// The announcement priority of a C value: .some(nil) for PARLA_PRIORITY_NONE, nil if unknown.
func priority(_ value: parla_priority) -> AnnouncementPriority?? {
    switch value {
    case PARLA_PRIORITY_NONE: return .some(nil)
    case PARLA_PRIORITY_LOW: return .low
    case PARLA_PRIORITY_DEFAULT: return .default
    case PARLA_PRIORITY_HIGH: return .high
    default: return nil
    }
}

@_cdecl("parla_utterance_set_announcement")
public func parlaUtteranceSetAnnouncement(_ handle: OpaquePointer?, _ value: parla_priority, _ queue: Int32) -> parla_status {
    guard utteranceBox(handle) != nil else { return PARLA_ERROR_INVALID_HANDLE }
    guard let p = priority(value) else {
        return fail(PARLA_ERROR_INVALID_ARGUMENT, "priority \(value.rawValue) is not a parla_priority (0-3)")
    }
    return update(handle) {
        $0.priority = p
        $0.queued = queue != 0
    }
}
