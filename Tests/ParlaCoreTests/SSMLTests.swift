import Testing
@testable import ParlaIO
import FoundationEssentials
@testable import ParlaCore

@Suite("SSML")
struct SSMLTests {
    @Test func languageSpansAndSourceOffsets() throws {
        let ssml = #"<speak>Hi &amp; <voice xml:lang="el">Γειά</voice></speak>"#
        let u = try Utterance(ssml: ssml)
        #expect(u.string == "Hi & Γειά")
        let langs = u.text.runs.map { $0[SpeechAttributes.LanguageAttribute.self]?.identifier }
        #expect(langs == [nil, "el"])
        // "&" is 1 text scalar that came from "&amp;" (5 markup scalars at offset 10).
        #expect(u.source?.markupRange(of: 3..<4) == 10..<15)
        // "Γειά" sits at text 5..<9 and markup 38..<42.
        let markup = Array(ssml.unicodeScalars)
        let r = u.source!.markupRange(of: 5..<9)
        #expect(String(String.UnicodeScalarView(markup[r])) == "Γειά")
    }

    @Test func prosodySayAsBreakAndSub() throws {
        let u = try Utterance(ssml: #"<speak><prosody rate="150%" pitch="+10%" volume="soft">a</prosody><break time="250ms"/><say-as interpret-as="characters">NLP</say-as> <sub alias="World Wide Web">WWW</sub></speak>"#)
        #expect(u.string == "aNLP World Wide Web")
        let first = u.text.runs.first!
        #expect(first[SpeechAttributes.RateAttribute.self] == 1.5)
        #expect(abs((first[SpeechAttributes.PitchAttribute.self] ?? 0) - 1.1) < 1e-9)
        #expect(first[SpeechAttributes.VolumeAttribute.self] == 0.5)
        #expect(u.pauses == [Utterance.Pause(offset: 1, duration: .milliseconds(250))])
        #expect(u.text.runs.contains { $0[SpeechAttributes.SpellOutAttribute.self] == true })
        // The alias maps to the whole <sub> element.
        let subStart = u.inputText.unicodeScalars.count - #"<sub alias="World Wide Web">WWW</sub></speak>"#.unicodeScalars.count
        #expect(u.source?.markupRange(of: 5..<10) == subStart..<(subStart + 37))
    }

    @Test(arguments: [
        ("Hello", 1, 1),                                    // not SSML at all
        ("<speak>Hello", 1, 13),                            // unclosed root
        ("<speak>a<s>b</speak>", 1, 13),                    // mismatched end tag
        ("<speak>Tom & Jerry</speak>", 1, 12),              // bare ampersand
        ("<speak>\n<voice xml:lang='??'>x</voice></speak>", 2, 1),  // bad language
        ("<speak><break time='soon'/></speak>", 1, 8),      // bad break
        ("<speak>x</speak>tail", 1, 17),                    // content after the root
        ("<speak a=1>x</speak>", 1, 10),                    // unquoted attribute
        ("<speak>a<mark/>b</speak>", 1, 9),                 // a mark without a name
    ])
    func invalidSSMLNamesLineAndColumn(ssml: String, line: Int, column: Int) {
        do {
            _ = try Utterance(ssml: ssml)
            Issue.record("accepted invalid SSML \(ssml)")
        } catch {
            #expect(error.code == .invalidSSML && error.line == line && error.column == column, "\(error)")
        }
    }

    @Test func marksKeepTheirNamesAndPlaces() throws {
        let ssml = #"<speak><mark name="m0"/>Hello <mark name="m1"/>wörld<mark name='end &amp; more'/></speak>"#
        let u = try Utterance(ssml: ssml)
        #expect(u.string == "Hello wörld")
        #expect(u.marks == [.init(name: "m0", offset: 0), .init(name: "m1", offset: 6), .init(name: "end & more", offset: 11)])
        // In the markup: each mark sits where the next spoken scalar comes from, the last at the end.
        let markup = Array(ssml.unicodeScalars)
        let positions = u.markPositions
        #expect(positions.map(\.name) == ["m0", "m1", "end & more"])
        #expect(markup[positions[0].inputOffset] == "H")
        #expect(markup[positions[1].inputOffset] == "w")
        #expect(positions[2].inputOffset == markup.count)
        // A caller's marks on plain text are in the text's own offsets, put in order.
        var plain = Utterance(string: "one two")
        plain.marks = [.init(name: "b", offset: 4), .init(name: "a", offset: 0)]
        #expect(plain.markPositions.map(\.name) == ["a", "b"] && plain.markPositions.map(\.inputOffset) == [0, 4])
    }

    @Test func commentsCDATAAndDeclarationsAreAccepted() throws {
        let u = try Utterance(ssml: "<?xml version=\"1.0\"?>\n<!-- c --><speak>a<!-- x --><![CDATA[<b>]]>&#x263A;&#65;</speak>\n")
        #expect(u.string == "a<b>☺A")
    }
}

@Suite("WebVTT cue text")
struct CueTextTests {
    @Test func markupIsStrippedAndCharacterReferencesDecoded() {
        #expect(CaptionFileWriter.cueText("<s>It&#8217;s &#x41;&#X42; <break/>done.</s>", isMarkup: true) == "It’s AB done.")
        // Escaped in the markup, escaped again for WebVTT; broken references stay as they are.
        #expect(CaptionFileWriter.cueText("a &amp;#65; &#; &#xZZ; &#1114112; &#65", isMarkup: true) == "a &amp;#65; &amp;#; &amp;#xZZ; &amp;#1114112; &amp;#65")
        #expect(CaptionFileWriter.cueText("Hello<break time=\"1s\"/>world<emphasis>!</emphasis>", isMarkup: true) == "Hello world!")
        // Plain text is taken as it is.
        #expect(CaptionFileWriter.cueText("Tom &#38; <Jerry>", isMarkup: false) == "Tom &amp;#38; &lt;Jerry&gt;")
    }
}
