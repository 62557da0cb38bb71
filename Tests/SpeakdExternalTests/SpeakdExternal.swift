import Testing

/// Other programs against the real `speakd`: schemathesis against its published contract, and
/// headless Chromium (its status page, and the Web Speech API through the SSIP front). Each
/// starts its own daemon, and they run one at a time.
@Suite(.serialized)
struct SpeakdExternal {}
