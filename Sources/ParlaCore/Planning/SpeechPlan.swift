import FoundationEssentials

/// An utterance resolved into runs the engine can speak one after another: each run has one
/// language, one voice and one set of prosody settings, and may be preceded by silence.
package struct SpeechPlan: Sendable {
    /// A stretch of the text spoken with uniform settings.
    package struct Run: Sendable, Hashable {
        /// Unicode-scalar offsets into the spoken text (``SpeechPlan/text``).
        package var range: Range<Int>
        /// The language the run is spoken in.
        package var language: LanguageTag
        /// The voice that speaks it.
        package var voice: SpeechVoice
        /// Rate in words per minute (engine range 80–1,000).
        package var rate: Int
        /// Engine pitch, 0–100 (50 is normal).
        package var pitch: Int
        /// Engine volume, 0–200 (100 is normal).
        package var volume: Int
        /// Punctuation read aloud.
        package var punctuation: PunctuationMode
        /// Whether the run is read character by character.
        package var spellOut: Bool
        /// Silence inserted before the run.
        package var silenceBefore: Duration

        /// A run with every setting given (plans normally make their own runs).
        package init(
            range: Range<Int>, language: LanguageTag, voice: SpeechVoice, rate: Int, pitch: Int, volume: Int,
            punctuation: PunctuationMode, spellOut: Bool, silenceBefore: Duration
        ) {
            self.range = range
            self.language = language
            self.voice = voice
            self.rate = rate
            self.pitch = pitch
            self.volume = volume
            self.punctuation = punctuation
            self.spellOut = spellOut
            self.silenceBefore = silenceBefore
        }

        func sameSettings(as other: Run) -> Bool {
            language == other.language && voice == other.voice && rate == other.rate && pitch == other.pitch
                && volume == other.volume && punctuation == other.punctuation && spellOut == other.spellOut
        }
    }

    /// The spoken text (for SSML input: the text content of the markup).
    package let text: String
    /// The runs, in text order, covering every non-empty part of the text.
    package var runs: [Run]
    /// Silence before the first run (the utterance's pre-delay).
    package var leadingSilence: Duration
    /// Silence after the last run (the post-delay, plus any trailing pauses).
    package var trailingSilence: Duration
    /// Where the spoken text came from, for utterances parsed from markup.
    package let source: SourceMap?

    /// The rest of this plan from text offset `offset`: runs that end before it are gone, the
    /// run holding it starts there, and no silence comes first. Offsets stay those of ``text``.
    package func resuming(from offset: Int) -> SpeechPlan {
        var plan = self
        plan.runs = runs.compactMap { run in
            guard run.range.upperBound > offset else { return nil }
            var r = run
            if r.range.lowerBound < offset {
                r.range = offset..<r.range.upperBound
                r.silenceBefore = .zero
            }
            return r
        }
        if let first = plan.runs.first, first.range.lowerBound >= offset, offset > 0 {
            plan.runs[0].silenceBefore = .zero
        }
        if offset > 0 { plan.leadingSilence = .zero }
        if plan.runs.isEmpty { plan.runs = Array(runs.suffix(1)) }  // nothing left: the last run, so the plan stays valid
        return plan
    }

    /// This plan with every run's rate and pitch multiplied by `rate` and `pitch`, kept inside
    /// the engine's ranges (live changes of speed and pitch).
    package func scaled(rate: Double, pitch: Double) -> SpeechPlan {
        guard rate != 1 || pitch != 1 else { return self }
        var plan = self
        for i in plan.runs.indices {
            let r = Double(plan.runs[i].rate) * (rate.isFinite ? rate : 1)
            let p = Double(plan.runs[i].pitch) * (pitch.isFinite ? pitch : 1)
            plan.runs[i].rate = Int(min(max(r, Self.rateRange.lowerBound), Self.rateRange.upperBound).rounded())
            plan.runs[i].pitch = Int(min(max(p, 0), 100).rounded())
        }
        return plan
    }

    /// Accepted range of ``Utterance/wordsPerMinute``, and the words per minute every run is kept within.
    package static let rateRange: ClosedRange<Double> = 80...1000
    /// Accepted ``Utterance/rate`` multipliers (the words per minute they give are then kept
    /// within ``rateRange``).
    package static let rateMultiplierRange: ClosedRange<Double> = 0.25...6
    /// Accepted range of ``Utterance/pitch``.
    package static let pitchRange: ClosedRange<Double> = 0...2
    /// Accepted range of ``Utterance/volume``.
    package static let volumeRange: ClosedRange<Double> = 0...2
    /// Accepted ranges of the rate, pitch and volume attributes of spans (multipliers; SSML
    /// nests them, so they reach further than the utterance's own settings, and the result
    /// is clamped to what the engine can do). NaN and infinities are rejected.
    package static let attributeRateRange: ClosedRange<Double> = 0.01...100
    package static let attributePitchRange: ClosedRange<Double> = 0...100
    package static let attributeVolumeRange: ClosedRange<Double> = 0...100
    /// The longest pause or delay an utterance may hold (a longer one is a mistake, and would
    /// be rendered as that much silence).
    package static let longestPause: Duration = .seconds(3600)

    private static func seconds(_ d: Duration) -> Double { d.inSeconds }

    /// Resolves `utterance` against `catalog`: validates its settings, picks a voice for every
    /// language span and splits the text where any setting changes or a pause is placed.
    /// - Throws: ``ParlaError`` for empty text, out-of-range settings or a language no voice speaks.
    /// - Parameters:
    ///   - utterance: the text and its settings.
    ///   - catalog: the voices to choose from.
    ///   - defaultLanguage: the language of text nothing else gives one.
    ///   - detector: finds the languages of text that has neither a language attribute
    ///     nor an utterance language; nil speaks such text in the utterance voice's language or
    ///     `defaultLanguage`.
    package init(_ utterance: Utterance, catalog: VoiceCatalog, defaultLanguage: LanguageTag = "en", detector: LanguageDetector? = nil)
        throws(ParlaError)
    {
        if let r = utterance.wordsPerMinute, !Self.rateRange.contains(r) {
            throw .parameterOutOfRange(name: "Rate (words per minute)", value: r, range: Self.rateRange)
        }
        guard Self.rateMultiplierRange.contains(utterance.rate) else {
            throw .parameterOutOfRange(name: "Rate multiplier", value: utterance.rate, range: Self.rateMultiplierRange)
        }
        guard Self.pitchRange.contains(utterance.pitch) else {
            throw .parameterOutOfRange(name: "Pitch multiplier", value: utterance.pitch, range: Self.pitchRange)
        }
        guard Self.volumeRange.contains(utterance.volume) else {
            throw .parameterOutOfRange(name: "Volume", value: utterance.volume, range: Self.volumeRange)
        }
        for d in [utterance.preUtteranceDelay, utterance.postUtteranceDelay] + utterance.pauses.map(\.duration) {
            guard d >= .zero, d <= Self.longestPause else {
                throw .parameterOutOfRange(
                    name: "Pause or delay (seconds)", value: Self.seconds(d), range: 0...Self.seconds(Self.longestPause))
            }
        }
        for run in utterance.text.runs {
            let attrs = run.attributes
            for (name, value, range) in [
                ("Rate attribute (multiplier)", attrs[SpeechAttributes.RateAttribute.self], Self.attributeRateRange),
                ("Pitch attribute (multiplier)", attrs[SpeechAttributes.PitchAttribute.self], Self.attributePitchRange),
                ("Volume attribute (multiplier)", attrs[SpeechAttributes.VolumeAttribute.self], Self.attributeVolumeRange),
            ] {
                if let value, !range.contains(value) { throw .parameterOutOfRange(name: name, value: value, range: range) }
            }
        }
        let text = utterance.string
        guard text.unicodeScalars.contains(where: { !$0.properties.isWhitespace }) else { throw .emptyText }
        self.text = text
        self.source = utterance.source

        var detector = utterance.language == nil ? detector : nil
        if let voiceLanguage = utterance.voice?.primaryLanguage, var d = detector {
            // The chosen voice's language wins ties.
            d.preferences.languages.removeAll { $0.language == voiceLanguage.language }
            d.preferences.languages.insert(voiceLanguage, at: 0)
            detector = d
        }
        let baseLanguage =
            utterance.language ?? utterance.voice?.primaryLanguage
            ?? detector?.preferences.languages.first ?? defaultLanguage
        let detected = detector.map { Self.detect(utterance, text: text, with: $0) } ?? []
        var detectedIndex = 0
        var voiceCache: [LanguageTag: SpeechVoice] = [:]
        func voice(for language: LanguageTag) throws(ParlaError) -> SpeechVoice {
            if let v = utterance.voice, v.speaks(language) { return v }
            if let v = voiceCache[language] { return v }
            // The most specific preference that covers the language.
            if let (_, v) = utterance.preferredVoices.filter({ language.isSpecialization(of: $0.key) })
                .max(by: { $0.key.identifier.count < $1.key.identifier.count })
            {
                voiceCache[language] = v
                return v
            }
            let v = try catalog.voice(for: language)
            voiceCache[language] = v
            return v
        }

        // Pauses, summed per offset.
        var pauseAt: [Int: Duration] = [:]
        for p in utterance.pauses { pauseAt[p.offset, default: .zero] += p.duration }
        let total = text.unicodeScalars.count
        let leading = utterance.preUtteranceDelay + (pauseAt[0] ?? .zero)
        var trailing = utterance.postUtteranceDelay
        for (offset, d) in pauseAt where offset >= total { trailing += d }
        let cuts = pauseAt.keys.filter { $0 > 0 && $0 < total }.sorted()

        var runs: [Run] = []
        var offset = 0
        var cutIndex = 0
        var blankCursor = (offset: 0, index: text.unicodeScalars.startIndex)
        var lastIsBlank = false
        for attributed in utterance.text.runs {
            let count = utterance.text.unicodeScalars[attributed.range].count
            let attrs = attributed.attributes
            // The run's languages: its attribute, else the detected segments it overlaps.
            var pieces: [(range: Range<Int>, language: LanguageTag)] = []
            let spanVoice = try attrs[SpeechAttributes.VoiceAttribute.self].map { id throws(ParlaError) in try catalog.voice(identifier: id)
            }
            if let explicit = attrs[SpeechAttributes.LanguageAttribute.self] {
                pieces = [(offset..<(offset + count), explicit)]
            } else if let spanVoice {
                pieces = [(offset..<(offset + count), spanVoice.primaryLanguage ?? baseLanguage)]
            } else if detected.isEmpty {
                pieces = [(offset..<(offset + count), baseLanguage)]
            } else {
                var p = offset
                while p < offset + count {
                    while detectedIndex < detected.count && detected[detectedIndex].range.upperBound <= p { detectedIndex += 1 }
                    var language = baseLanguage
                    var pieceEnd = offset + count
                    if detectedIndex < detected.count {
                        let d = detected[detectedIndex]
                        if d.range.lowerBound <= p {
                            pieceEnd = min(pieceEnd, d.range.upperBound)
                            // A detected language with no voice in this catalog falls back.
                            if let l = d.language, (try? voice(for: l)) != nil { language = l }
                        } else {
                            pieceEnd = min(pieceEnd, d.range.lowerBound)
                        }
                    }
                    pieces.append((p..<pieceEnd, language))
                    p = pieceEnd
                }
            }
            for piece in pieces {
                let language = piece.language
                var v: SpeechVoice
                if let spanVoice { v = spanVoice } else { v = try voice(for: language) }
                // Spelling out is espeak-ng's (SSML say-as): a Piper voice's span is spelled by
                // espeak-ng's voice of the language.
                if attrs[SpeechAttributes.SpellOutAttribute.self] == true, v.engine == SpeechVoice.piperEngine,
                    let spelling = catalog.espeakVoice(for: language)
                {
                    v = spelling
                }
                let rateWPM =
                    (utterance.wordsPerMinute ?? v.wordsPerMinute ?? 175) * utterance.rate
                    * (attrs[SpeechAttributes.RateAttribute.self] ?? 1)
                let pitch = 50 * (v.pitch ?? 1) * utterance.pitch * (attrs[SpeechAttributes.PitchAttribute.self] ?? 1)
                let volume = 100 * utterance.volume * (attrs[SpeechAttributes.VolumeAttribute.self] ?? 1)
                let template = Run(
                    range: offset..<(offset + count), language: language, voice: v,
                    rate: Int(min(max(rateWPM, Self.rateRange.lowerBound), Self.rateRange.upperBound).rounded()),
                    pitch: Int(min(max(pitch, 0), 100).rounded()),
                    volume: Int(min(max(volume, 0), 200).rounded()),
                    punctuation: attrs[SpeechAttributes.PunctuationAttribute.self] ?? utterance.punctuation,
                    spellOut: attrs[SpeechAttributes.SpellOutAttribute.self] ?? false,
                    silenceBefore: .zero)
                // Split the piece at every pause inside it.
                var start = piece.range.lowerBound
                let end = piece.range.upperBound
                while start < end {
                    var pieceEnd = end
                    var silence = Duration.zero
                    if cutIndex < cuts.count, cuts[cutIndex] == start {
                        silence = pauseAt[start] ?? .zero
                        cutIndex += 1
                    }
                    if cutIndex < cuts.count, cuts[cutIndex] < end { pieceEnd = cuts[cutIndex] }
                    var run = template
                    run.range = start..<pieceEnd
                    run.silenceBefore = silence
                    Self.append(
                        run, to: &runs, blank: Self.isBlank(text.unicodeScalars, run.range, in: &blankCursor), lastIsBlank: &lastIsBlank)
                    start = pieceEnd
                }
            }
            offset += count
        }
        self.runs = runs
        self.leadingSilence = leading
        self.trailingSilence = trailing
    }

    /// A plan of `runs` over `text` as they are (for tests and fuzzing: no catalog, no checks).
    package init(text: String, runs: [Run], leadingSilence: Duration = .zero, trailingSilence: Duration = .zero, source: SourceMap? = nil) {
        self.text = text
        self.runs = runs
        self.leadingSilence = leadingSilence
        self.trailingSilence = trailingSilence
        self.source = source
    }

    /// The detected language segments of every stretch of text without a language attribute,
    /// in offsets of the whole text.
    private static func detect(_ utterance: Utterance, text: String, with detector: LanguageDetector) -> [(
        range: Range<Int>, language: LanguageTag?
    )] {
        var out: [(range: Range<Int>, language: LanguageTag?)] = []
        let scalars = text.unicodeScalars
        var offset = 0
        var stretch: Range<Int>? = nil
        var index = scalars.startIndex
        var indexOffset = 0
        func flush() {
            guard let r = stretch else { return }
            let lo = scalars.index(index, offsetBy: r.lowerBound - indexOffset)
            let hi = scalars.index(lo, offsetBy: r.count)
            index = hi
            indexOffset = r.upperBound
            for seg in detector.detect(String(scalars[lo..<hi])) {
                out.append(((seg.range.lowerBound + r.lowerBound)..<(seg.range.upperBound + r.lowerBound), seg.language))
            }
            stretch = nil
        }
        for run in utterance.text.runs {
            let count = utterance.text.unicodeScalars[run.range].count
            if run.attributes[SpeechAttributes.LanguageAttribute.self] == nil {
                stretch = (stretch?.lowerBound ?? offset)..<(offset + count)
            } else {
                flush()
            }
            offset += count
        }
        flush()
        return out
    }

    /// Whether `range` of `scalars` is only whitespace; `cursor` walks forward through the text
    /// so that checking every run costs one pass.
    private static func isBlank(
        _ scalars: String.UnicodeScalarView, _ range: Range<Int>, in cursor: inout (offset: Int, index: String.UnicodeScalarView.Index)
    ) -> Bool {
        var i = scalars.index(cursor.index, offsetBy: range.lowerBound - cursor.offset)
        var blank = true
        for _ in range {
            if !scalars[i].properties.isWhitespace { blank = false }
            i = scalars.index(after: i)
        }
        cursor = (range.upperBound, i)
        return blank
    }

    /// Appends `run`, merging it into the previous run when the settings match and no pause
    /// separates them. Whitespace-only runs join a neighbour whatever its settings, so a space
    /// between two languages does not become a segment of its own.
    private static func append(_ run: Run, to runs: inout [Run], blank: Bool, lastIsBlank: inout Bool) {
        guard var last = runs.last, run.silenceBefore == .zero else {
            runs.append(run)
            lastIsBlank = blank
            return
        }
        if lastIsBlank {
            // The previous run was only whitespace: it takes this run's settings.
            var merged = run
            merged.range = last.range.lowerBound..<run.range.upperBound
            merged.silenceBefore = last.silenceBefore
            runs[runs.count - 1] = merged
            lastIsBlank = blank
            return
        }
        if blank || last.sameSettings(as: run) {
            last.range = last.range.lowerBound..<run.range.upperBound
            runs[runs.count - 1] = last
        } else {
            runs.append(run)
        }
    }

    /// The language and voice segments of the plan: adjacent runs with the same language and
    /// voice form one segment.
    package var segments: [(range: Range<Int>, language: LanguageTag, voice: SpeechVoice)] {
        var out: [(range: Range<Int>, language: LanguageTag, voice: SpeechVoice)] = []
        for r in runs {
            if let last = out.last, last.language == r.language, last.voice == r.voice {
                out[out.count - 1].range = last.range.lowerBound..<r.range.upperBound
            } else {
                out.append((r.range, r.language, r.voice))
            }
        }
        return out
    }
}
