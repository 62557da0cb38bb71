import SpeakdHarness
import Testing

/// The real `speak` and `speakd` executables. Every test starts its own audio server and daemon
/// and compares timings with a recording, so the suites run one at a time rather than compete
/// for the machine's two cores.
@Suite(.serialized)
struct SpeakdIntegration {}
