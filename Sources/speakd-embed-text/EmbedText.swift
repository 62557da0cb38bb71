import Foundation

/// `speakd-embed-text INPUT OUTPUT TYPE PROPERTY`: writes a Swift file that extends `TYPE` with
/// `static let PROPERTY: String`, the UTF-8 text of INPUT. Used by the EmbedServedFiles
/// build plugin.
@main
struct EmbedText {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 5 else {
            FileHandle.standardError.write(Data("usage: speakd-embed-text INPUT OUTPUT TYPE PROPERTY\n".utf8))
            exit(2)
        }
        let text = try String(contentsOfFile: arguments[1], encoding: .utf8)
        // A raw string whose delimiter the text does not contain: no escaping, no interpolation.
        // The line break before the closing delimiter is not part of the literal, so the text
        // keeps its own last line break.
        var hashes = "#"
        while text.contains("\"" + hashes) || text.contains("\\" + hashes) { hashes += "#" }
        let source = """
            // Generated from \(URL(fileURLWithPath: arguments[1]).lastPathComponent) by speakd-embed-text; do not edit.
            extension \(arguments[3]) {
                static let \(arguments[4]): String = \(hashes)\"\"\"
            \(text)
            \"\"\"\(hashes)
            }

            """
        try source.write(toFile: arguments[2], atomically: true, encoding: .utf8)
    }
}
