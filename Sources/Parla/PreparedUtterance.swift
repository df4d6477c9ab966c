/// An utterance resolved ahead of speaking or writing it (``SpeechSynthesizer/prepare(_:)``):
/// its languages and voices are chosen and its settings checked. A program that must report
/// bad input before anything plays (a command line, a speech-dispatcher module) prepares,
/// then speaks what it prepared without the work being done twice.
public struct PreparedUtterance: Sendable {
    /// The utterance as given.
    public let utterance: Utterance
    package let plan: SpeechPlan

    package init(utterance: Utterance, plan: SpeechPlan) {
        self.utterance = utterance
        self.plan = plan
    }

    /// The language and voice of each stretch of the text, in order (neighbouring stretches
    /// with the same language and voice are one).
    public var voices: [(language: LanguageTag, voice: SpeechVoice)] {
        plan.segments.map { ($0.language, $0.voice) }
    }
}
