import FoundationEssentials

/// How much punctuation the engine reads aloud.
public enum PunctuationMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// Punctuation shapes intonation and pauses but is not spoken.
    case none
    /// Symbols that carry meaning (`@ # $ % ^ & _ [ ] { } \ ~`) are spoken.
    case some
    /// Every punctuation character is spoken.
    case all
}

/// How urgent an announcement is, following the accessibility announcement rules.
public enum AnnouncementPriority: String, Sendable, Hashable, Codable, CaseIterable {
    /// Interrupts other speech and is not interrupted once started.
    case high
    /// Interrupts other speech and can itself be interrupted.
    case `default`
    /// Waits until all other speech has finished.
    case low
}

/// Attribute keys that carry speech settings on spans of an `AttributedString`.
public enum SpeechAttributes {
    /// The BCP 47 language of a span; explicit spans always win over detection.
    public enum LanguageAttribute: AttributedStringKey {
        public typealias Value = LanguageTag
        public static let name = "Parla.speechLanguage"
        public static var inheritedByAddedText: Bool { false }
    }

    /// Whether an announcement waits behind current speech instead of interrupting it.
    public enum QueueAnnouncementAttribute: AttributedStringKey {
        public typealias Value = Bool
        public static let name = "Parla.speechQueueAnnouncement"
    }

    /// Whether the utterance resumes after an interrupting announcement
    /// (``Utterance/resumesAfterInterruption``); true on any span turns it on.
    public enum ResumesAfterInterruptionAttribute: AttributedStringKey {
        public typealias Value = Bool
        public static let name = "Parla.speechResumesAfterInterruption"
    }

    /// The priority of an announcement (high, default, low).
    public enum AnnouncementPriorityAttribute: AttributedStringKey {
        public typealias Value = AnnouncementPriority
        public static let name = "Parla.speechAnnouncementPriority"
    }

    /// A pitch multiplier for the span (1 is the voice's normal pitch). 0–100 is accepted,
    /// since nested SSML multiplies them; the pitch heard stays within 0–2 times the voice's
    /// (Piper's voices have no pitch control and keep their own).
    public enum PitchAttribute: AttributedStringKey {
        public typealias Value = Double
        public static let name = "Parla.speechPitch"
    }

    /// A rate multiplier for the span (1 is the utterance's rate). 0.01–100 is accepted,
    /// since nested SSML multiplies them; the speed heard stays within 80–1,000 words per minute.
    public enum RateAttribute: AttributedStringKey {
        public typealias Value = Double
        public static let name = "Parla.speechRate"
    }

    /// A volume multiplier for the span (1 is the utterance's volume). 0–100 is accepted,
    /// since nested SSML multiplies them; the volume heard stays within 0–2 times normal.
    public enum VolumeAttribute: AttributedStringKey {
        public typealias Value = Double
        public static let name = "Parla.speechVolume"
    }

    /// How much punctuation is spoken in the span.
    public enum PunctuationAttribute: AttributedStringKey {
        public typealias Value = PunctuationMode
        public static let name = "Parla.speechPunctuation"
    }

    /// Whether the span is read character by character.
    public enum SpellOutAttribute: AttributedStringKey {
        public typealias Value = Bool
        public static let name = "Parla.speechSpellOut"
    }

    /// The voice that speaks the span: a voice identifier such as `piper.en_US-joe-medium`
    /// (SSML `<voice name>`). Its language is the span's unless the span has a language.
    public enum VoiceAttribute: AttributedStringKey {
        public typealias Value = String
        public static let name = "Parla.speechVoice"
        public static var inheritedByAddedText: Bool { false }
    }
}

extension AttributeScopes {
    /// The speech attributes Parla reads from an `AttributedString`.
    public struct ParlaAttributes: AttributeScope {
        /// The span's language.
        public let speechLanguage: SpeechAttributes.LanguageAttribute
        /// Whether the announcement queues instead of interrupting.
        public let speechQueueAnnouncement: SpeechAttributes.QueueAnnouncementAttribute
        /// The announcement's priority.
        public let speechAnnouncementPriority: SpeechAttributes.AnnouncementPriorityAttribute
        /// Whether the utterance resumes after an interrupting announcement.
        public let speechResumesAfterInterruption: SpeechAttributes.ResumesAfterInterruptionAttribute
        /// The span's pitch multiplier.
        public let speechPitch: SpeechAttributes.PitchAttribute
        /// The span's rate multiplier.
        public let speechRate: SpeechAttributes.RateAttribute
        /// The span's volume multiplier.
        public let speechVolume: SpeechAttributes.VolumeAttribute
        /// The span's punctuation mode.
        public let speechPunctuation: SpeechAttributes.PunctuationAttribute
        /// Whether the span is spelled out.
        public let speechSpellOut: SpeechAttributes.SpellOutAttribute
        /// The voice that speaks the span.
        public let speechVoice: SpeechAttributes.VoiceAttribute
    }

    /// Parla's speech attributes, for `AttributedString(…, including: \.parla)`-style APIs.
    public var parla: ParlaAttributes.Type { ParlaAttributes.self }
}

extension AttributeDynamicLookup {
    /// Lets `string.speechLanguage = "fr"` and friends work on any `AttributedString`.
    public subscript<T: AttributedStringKey>(
        dynamicMember keyPath: KeyPath<AttributeScopes.ParlaAttributes, T>
    ) -> T {
        self[T.self]
    }
}
