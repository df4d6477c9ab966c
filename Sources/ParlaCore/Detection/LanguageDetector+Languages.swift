import FoundationEssentials
import RealModule

/// Languages within a script: the n-gram model and the switching penalty over the words of
/// each run of a script several languages share.
extension LanguageDetector {
    /// The words of every run of one script group, their emission costs and their labels.
    struct GroupLabels {
        var words: [Range<Int>] = []
        /// The words of each run (words are found run by run, so they are contiguous).
        var wordsOfRun: [Int: Range<Int>] = [:]
        var emission: [Float] = []
        var labels: [Int] = []
        var prior: [Float] = []
    }

    /// Finds the words of all runs of group `g` and labels them with one Viterbi pass, so that
    /// context carries across interruptions by other scripts ("Я люблю iPhone и Android").
    func labelGroup(_ v: [UInt32], _ scripts: [UnicodeScript], runs: [Run], group g: Int) -> GroupLabels {
        let group = model.groups[g]
        let L = group.languages.count
        var out = GroupLabels()
        out.prior = priors(group)
        for (r, run) in runs.enumerated() where run.key == 1000 + Int32(g) {
            // Words: letters of the group's scripts, with the combining marks that follow them.
            let firstWord = out.words.count
            defer { out.wordsOfRun[r] = firstWord..<out.words.count }
            var i = run.start
            while i < run.end {
                let s = scripts[i]
                guard !s.isNeutral, model.groupIndex(of: s) == g else { i += 1; continue }
                var j = i + 1
                while j < run.end {
                    let t = scripts[j]
                    if t == .inherited || (!t.isNeutral && model.groupIndex(of: t) == g) { j += 1 } else { break }
                }
                out.words.append(i..<j)
                i = j
            }
        }
        let m = out.words.count
        guard m > 0 else { return out }
        // Emission costs (nats) per word and language. Naive Bayes over overlapping n-grams is
        // overconfident; dividing by the n-gram order tempers it so that switch costs compare.
        var emission = [Float](repeating: 0, count: m * L)
        var acc = [UInt32](repeating: 0, count: L)
        var framed: [UInt32] = []
        // Repeated words are scored once; short texts are not worth the dictionary.
        let useCache = m > 24
        var cache: [UInt64: Int] = [:]
        let unit = Self.emissionWeight / (group.scale * Float(group.maxOrder))
        for (w, range) in out.words.enumerated() {
            framed.removeAll(keepingCapacity: true)
            framed.append(2)
            var h: UInt64 = 0x8422_2325_CBF2_9CE4
            for k in range {
                let c = model.lowercased(v[k])
                framed.append(c)
                h = (h ^ UInt64(c)) &* 0x100_0000_01B3
            }
            framed.append(3)
            if useCache, let cached = cache[h] {
                for l in 0..<L { emission[w * L + l] = emission[cached * L + l] }
                continue
            }
            for l in 0..<L { acc[l] = 0 }
            acc.withUnsafeMutableBufferPointer { a in
                framed.withUnsafeBufferPointer { f in
                    guard let base = a.baseAddress else { return }  // no languages: nothing to score
                    model.addPenalties(framedWord: f, group: group, into: base)
                }
            }
            for l in 0..<L { emission[w * L + l] = Float(acc[l]) * unit }
            if useCache { cache[h] = w }
        }
        // Viterbi: switching language costs less at a sentence boundary.
        let prior = out.prior
        var cost = [Float](repeating: 0, count: L)
        var next = [Float](repeating: 0, count: L)
        var back = [UInt8](repeating: 0, count: m * L)
        for l in 0..<L { cost[l] = prior[l] + emission[l] }
        if m > 1 {
            emission.withUnsafeBufferPointer { emission in
                back.withUnsafeMutableBufferPointer { back in
                    prior.withUnsafeBufferPointer { prior in
                        for w in 1..<m {
                            // Switching is cheaper at a sentence end, and where letters of another script
                            // come between the words (the context is broken: "日本語の indent は").
                            var tau = Self.switchCost
                            for k in out.words[w - 1].upperBound..<out.words[w].lowerBound
                            where Self.endsSentence(v[k]) || (v[k] >= 0x80 && !UnicodeScript.of(v[k]).isNeutral) {
                                tau = Self.switchCostAtSentence
                                break
                            }
                            var bestPrev = 0
                            for l in 1..<L where cost[l] < cost[bestPrev] { bestPrev = l }
                            for l in 0..<L {
                                let stay = cost[l]
                                let move = cost[bestPrev] + tau + prior[l]
                                if stay <= move {
                                    next[l] = stay + emission[w * L + l]
                                    back[w * L + l] = UInt8(l)
                                } else {
                                    next[l] = move + emission[w * L + l]
                                    back[w * L + l] = UInt8(bestPrev)
                                }
                            }
                            swap(&cost, &next)
                        }
                    }
                }
            }
        }
        var best = 0
        for l in 1..<L where cost[l] < cost[best] { best = l }
        var labels = [Int](repeating: cost[best].isFinite ? best : -1, count: m)
        if cost[best].isFinite && m > 1 {
            for w in stride(from: m - 1, to: 0, by: -1) { labels[w - 1] = Int(back[w * L + labels[w]]) }
        }
        out.emission = emission
        out.labels = labels
        return out
    }

    /// The segments of one run of a modelled script from its words' labels: words with equal
    /// labels form a segment, cut inside the gap between words by the neutral rule.
    func runSegments(_ v: [UInt32], _ keys: [Int32], run: Run, runIndex: Int, group g: Int, labels gl: GroupLabels) -> [RawSegment] {
        let group = model.groups[g]
        let L = group.languages.count
        let script = run.letters > 0 ? group.id : nil
        let ws = gl.wordsOfRun[runIndex] ?? 0..<0
        guard let firstWord = ws.first else {
            let best = (0..<L).min { gl.prior[$0] < gl.prior[$1] }
            let language: LanguageTag? = best.flatMap { gl.prior[$0].isFinite ? group.languages[$0] : nil }
            return [RawSegment(range: run.start..<run.end, language: language, confidence: 0.5, script: script, letters: run.letters)]
        }
        guard gl.labels[firstWord] >= 0 else {
            return [RawSegment(range: run.start..<run.end, language: nil, confidence: 0, script: script, letters: run.letters)]
        }
        var out: [RawSegment] = []
        var segStart = run.start
        var first = firstWord
        let last = ws.upperBound - 1
        for w in (firstWord + 1)...(last + 1) {
            if w <= last && gl.labels[w] == gl.labels[first] { continue }
            let end = w > last ? run.end : Self.cut(v, keys, from: gl.words[w - 1].upperBound, to: gl.words[w].lowerBound)
            let label = gl.labels[first]
            var totals = [Float](repeating: 0, count: L)
            var letters = 0
            for x in first..<w {
                letters += gl.words[x].count
                for l in 0..<L { totals[l] += gl.emission[x * L + l] }
            }
            var z: Float = 0
            for l in 0..<L where gl.prior[l].isFinite { z += Float.exp(-(totals[l] - totals[label]) / Self.temperature) }
            var ngrams = 0
            for x in first..<w { ngrams += Self.ngramCount(letters: gl.words[x].count, maxOrder: group.maxOrder) }
            let fit = Self.fit(emission: totals[label], ngrams: ngrams, group: group, language: label)
            out.append(
                RawSegment(
                    range: segStart..<end, language: group.languages[label], confidence: Double(fit / max(z, 1)), script: script,
                    letters: letters))
            segStart = end
            first = w
        }
        return out
    }

    /// How many n-grams a word of `letters` scalars gives (as `train.py` counts them: every
    /// window of 1…maxOrder of the framed word, but a lone frame mark).
    static func ngramCount(letters k: Int, maxOrder: Int) -> Int {
        var count = k
        if maxOrder >= 2 { for n in 2...maxOrder { count += max(0, k + 2 - n + 1) } }
        return count
    }

    /// How well a stretch fits the language it was given, from 1 (as well as that language's
    /// own text does) down towards 0: the model's penalties are relative to the group's most
    /// likely language for each n-gram, so text of a language the group has no class for pays
    /// far more per n-gram than any of its own languages. The limit grows with the number of
    /// competing languages and shrinks with length, set so that 0.4–3 % of the dev set's
    /// correctly labelled strings exceed it, depending on the group; times the language's
    /// `LanguageModel.Group.fitScale` (how much more its own text costs under its table
    /// than under plain naive Bayes).
    static func fit(emission: Float, ngrams: Int, group: LanguageModel.Group, language: Int) -> Float {
        guard ngrams > 0, emission.isFinite else { return 1 }
        let perNgram = emission * Float(group.maxOrder) / Self.emissionWeight / Float(ngrams)  // nats
        let limit =
            Float.log(Float(group.languages.count + 1)) * (Self.fitBase + Self.fitSlope / Float(ngrams).squareRoot())
            * group.fitScale[language]
        return perNgram <= limit ? 1 : Float.exp(-(perNgram - limit) / Self.fitWidth)
    }

    /// Prior cost (nats) of each language of `group`: preferred languages cost least, then the
    /// script's default, then the rest; languages outside ``candidates`` are impossible.
    private func priors(_ group: LanguageModel.Group) -> [Float] {
        let scriptDefault = scriptDefaults[group.id]?.language
        let preferred = preferences.languages.map(\.language)
        return zip(group.codes, group.bias).map { code, bias in
            if let candidates, !candidates.contains(code) { return .infinity }
            if let rank = preferred.firstIndex(of: code) { return Float(rank) * Self.preferenceStep }
            return (code == scriptDefault ? Self.scriptDefaultCost : Self.otherLanguageCost) + bias
        }
    }
}
