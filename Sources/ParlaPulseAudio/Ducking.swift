internal import CParlaDuckGuard
internal import CPulseAudio
import ParlaCore
#if canImport(Glibc)
    import Glibc
#endif

/// How Parla lowers other programs' audio while it speaks (``AudioOutputOptions/ducking``).
public struct DuckingOptions: Sendable, Hashable {
    /// How far other streams are lowered, in dB (positive: 15 lowers them by 15 dB).
    public var attenuation: Double
    /// How long after Parla's last stream ends the others come back up: short gaps between
    /// utterances do not make the music pump.
    public var release: Duration

    /// Creates ducking options; the defaults lower other audio by 15 dB and bring it back
    /// 300 ms after the speech.
    public init(attenuation: Double = 15, release: Duration = .milliseconds(300)) {
        self.attenuation = attenuation
        self.release = release
    }
}

/// What ducking does on this server, once known.
package enum DuckingMode: Sendable, Equatable {
    /// Not yet known: the server has not been asked.
    case unknown
    /// The server ducks by itself: PulseAudio's `module-role-ducking` is loaded with Parla's
    /// role among its trigger roles, so Parla changes nothing.
    case server
    /// Parla lowers the other streams' volumes and restores them.
    case manual
}

/// Lowers other programs' streams while any of an output's streams plays, and restores them
/// afterwards. All of it runs with the output's main loop lock held.
///
/// Where PulseAudio's `module-role-ducking` already triggers on Parla's role, Parla leaves the
/// job to it. Otherwise it sets every other sink input's volume (except those of the roles
/// `a11y` and `phone`: screen readers and calls) to its own volume lowered by
/// ``DuckingOptions/attenuation``, and afterwards sets back each one whose volume is still the
/// one Parla set (a volume the user changed meanwhile is theirs). Before it lowers anything it
/// tells its guard, a small helper process (`duck_guard.c`), what the volume was: if this
/// process dies without restoring (SIGKILL, a crash), the guard's socket closes and the guard
/// restores the volumes itself.
///
/// Unchecked: its state is read and written only with its output's main-loop lock held,
/// by the output's threads or by libpulse's callbacks on the main loop's thread.
package final class Ducker: @unchecked Sendable {
    let options: DuckingOptions
    let role: String
    let server: String?
    private(set) var mode: DuckingMode = .unknown
    private var askingServer = false
    /// Streams of this output that are playing.
    private var audible = 0
    /// Whether other streams should be down now.
    private var isDucking = false
    /// The streams lowered, with their volume before and the one Parla set.
    private var lowered: [UInt32: (original: pa_cvolume, ducked: pa_cvolume)] = [:]
    private var releaseTimer: OpaquePointer?
    private var subscribed: OpaquePointer?
    private var guardSocket: Int32 = -1
    private var guardPID: Int32 = -1
    private var context: OpaquePointer?

    private let mainloop: OpaquePointer

    init(options: DuckingOptions, role: String, server: String?, mainloop: OpaquePointer) {
        self.mainloop = mainloop
        self.options = options
        self.role = role
        self.server = server
    }

    deinit {
        // The guard restores whatever is still lowered once its socket closes, and is reaped.
        if guardSocket >= 0 { parla_duck_guard_end(guardSocket, guardPID) }
    }

    /// Roles never lowered: Parla's own and those of screen readers and calls.
    private var exemptRoles: Set<String> { ["a11y", "phone", role] }

    private var unmanaged: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// A stream of the output started (lock held).
    func streamStarted(context ctx: OpaquePointer) {
        audible += 1
        cancelRelease()
        if context != ctx {
            // A new connection (the server restarted): what was lowered on the old one is gone.
            context = ctx
            subscribed = nil
            lowered = [:]
            mode = .unknown
            askingServer = false
        }
        guard !isDucking else { return }
        isDucking = true
        begin()
    }

    /// A stream of the output ended (lock held).
    func streamEnded() {
        audible = max(0, audible - 1)
        guard audible == 0, isDucking, let ctx = context, pa_context_get_state(ctx) == PA_CONTEXT_READY else { return }
        cancelRelease()
        let usec = UInt64(clamping: max(0, options.release.wholeNanoseconds / 1000))
        releaseTimer = pa_context_rttime_new(
            ctx, pa_rtclock_now() &+ usec,
            { _, _, _, userdata in
                guard let userdata else { return }
                Unmanaged<Ducker>.fromOpaque(userdata).takeUnretainedValue().release()
            }, unmanaged)
        if releaseTimer == nil { release() }
    }

    private func cancelRelease() {
        guard let timer = releaseTimer else { return }
        releaseTimer = nil
        if let api = pa_threaded_mainloop_get_api(mainloop), let free = api.pointee.time_free {
            free(timer)
        }
    }

    private func begin() {
        guard let ctx = context else { return }
        switch mode {
        case .server: return
        case .manual: lowerAll(ctx)
        case .unknown:
            guard !askingServer else { return }
            askingServer = true
            let op = pa_context_get_module_info_list(
                ctx,
                { ctx, info, eol, userdata in
                    guard let userdata else { return }
                    let me = Unmanaged<Ducker>.fromOpaque(userdata).takeUnretainedValue()
                    if eol == 0, let info {
                        let name = info.pointee.name.map { String(cString: $0) } ?? ""
                        let argument = info.pointee.argument.map { String(cString: $0) } ?? ""
                        if name == "module-role-ducking", Ducker.triggerRoles(argument).contains(me.role) { me.mode = .server }
                        return
                    }
                    me.askingServer = false
                    if me.mode == .unknown { me.mode = .manual }
                    if me.mode == .manual, me.isDucking, let ctx { me.lowerAll(ctx) }
                }, unmanaged)
            if let op { pa_operation_unref(op) } else { askingServer = false; mode = .manual; lowerAll(ctx) }
        }
    }

    /// The roles `module-role-ducking` triggers on, from its argument string (`phone` unless
    /// `trigger_roles` says otherwise).
    package static func triggerRoles(_ argument: String) -> Set<String> {
        var roles: Set<String> = ["phone"]
        // module arguments: key=value pairs separated by blanks; a value may be quoted.
        var key = "", value = "", inValue = false, quote: Character? = nil
        func finish() {
            if key == "trigger_roles" { roles = Set(value.split(separator: ",").map { String($0.filter { $0 != " " }) }) }
            key = ""; value = ""; inValue = false
        }
        for c in argument {
            if let q = quote {
                if c == q { quote = nil } else { value.append(c) }
            } else if c == " " || c == "\t" || c == "\n" {
                finish()
            } else if inValue {
                if c == "\"" || c == "'" { quote = c } else { value.append(c) }
            } else if c == "=" {
                inValue = true
            } else {
                key.append(c)
            }
        }
        finish()
        return roles
    }

    private func lowerAll(_ ctx: OpaquePointer) {
        guard isDucking else { return }
        if guardSocket < 0 { guardSocket = parla_duck_guard_start(server, &guardPID) }
        if subscribed != ctx {
            subscribed = ctx
            pa_context_set_subscribe_callback(
                ctx,
                { ctx, event, index, userdata in
                    guard let userdata, let ctx else { return }
                    let me = Unmanaged<Ducker>.fromOpaque(userdata).takeUnretainedValue()
                    let facility = event.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
                    let type = event.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue
                    guard facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue else { return }
                    if type == PA_SUBSCRIPTION_EVENT_REMOVE.rawValue {
                        me.forget(index)
                    } else if type == PA_SUBSCRIPTION_EVENT_NEW.rawValue, me.isDucking {
                        // Music that starts while Parla speaks is lowered too.
                        let op = pa_context_get_sink_input_info(
                            ctx, index,
                            { ctx, info, eol, userdata in
                                guard eol == 0, let info, let ctx, let userdata else { return }
                                Unmanaged<Ducker>.fromOpaque(userdata).takeUnretainedValue().lower(info.pointee, ctx)
                            }, userdata)
                        if let op { pa_operation_unref(op) }
                    }
                }, unmanaged)
            if let op = pa_context_subscribe(ctx, PA_SUBSCRIPTION_MASK_SINK_INPUT, nil, nil) { pa_operation_unref(op) }
        }
        let op = pa_context_get_sink_input_info_list(
            ctx,
            { ctx, info, eol, userdata in
                guard eol == 0, let info, let ctx, let userdata else { return }
                Unmanaged<Ducker>.fromOpaque(userdata).takeUnretainedValue().lower(info.pointee, ctx)
            }, unmanaged)
        if let op { pa_operation_unref(op) }
    }

    /// Lowers one stream, if it is another program's, of a role that ducks, and not already down.
    private func lower(_ info: pa_sink_input_info, _ ctx: OpaquePointer) {
        guard isDucking, mode == .manual, lowered[info.index] == nil, info.volume_writable != 0,
            info.client != pa_context_get_index(ctx)
        else { return }
        let streamRole = info.proplist.flatMap { pa_proplist_gets($0, "media.role") }.map { String(cString: $0) }
        if let streamRole, exemptRoles.contains(streamRole) { return }
        var original = info.volume, ducked = pa_cvolume()
        guard pa_cvolume_valid(&original) != 0 else { return }
        pa_sw_cvolume_multiply_scalar(&ducked, &original, pa_sw_volume_from_dB(-max(0, options.attenuation)))
        let before = Self.values(original), after = Self.values(ducked)
        if guardSocket >= 0 { _ = parla_duck_guard_remember(guardSocket, info.index, UInt32(before.count), before, after) }
        lowered[info.index] = (original, ducked)
        if let op = pa_context_set_sink_input_volume(ctx, info.index, &ducked, nil, nil) { pa_operation_unref(op) }
    }

    /// Brings every lowered stream back up, unless Parla speaks again meanwhile.
    private func release() {
        releaseTimer = nil
        guard audible == 0, isDucking else { return }
        isDucking = false
        guard let ctx = context else { return }
        for index in lowered.keys {
            let op = pa_context_get_sink_input_info(
                ctx, index,
                { ctx, info, eol, userdata in
                    guard eol == 0, let info, let ctx, let userdata else { return }
                    Unmanaged<Ducker>.fromOpaque(userdata).takeUnretainedValue().restore(info.pointee, ctx)
                }, unmanaged)
            if let op { pa_operation_unref(op) }
        }
    }

    private func restore(_ info: pa_sink_input_info, _ ctx: OpaquePointer) {
        guard !isDucking, let entry = lowered[info.index] else { return }
        if Self.unchanged(info.volume, from: entry.ducked) {
            var original = entry.original
            if let op = pa_context_set_sink_input_volume(ctx, info.index, &original, nil, nil) { pa_operation_unref(op) }
        }
        forget(info.index)
    }

    private func forget(_ index: UInt32) {
        guard lowered.removeValue(forKey: index) != nil, guardSocket >= 0 else { return }
        _ = parla_duck_guard_forget(guardSocket, index)
    }

    /// The volume of each channel.
    static func values(_ volume: pa_cvolume) -> [UInt32] {
        withUnsafeBytes(of: volume.values) { raw in
            Array(raw.bindMemory(to: UInt32.self).prefix(Int(min(volume.channels, UInt8(PA_CHANNELS_MAX)))))
        }
    }

    /// Whether `now` is still the volume Parla set (PipeWire stores volumes as floats, so a
    /// channel may come back a little different).
    static func unchanged(_ now: pa_cvolume, from ducked: pa_cvolume) -> Bool {
        let a = values(now), b = values(ducked)
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in (x > y ? x - y : y - x) <= y / 100 + 2 }
    }
}
