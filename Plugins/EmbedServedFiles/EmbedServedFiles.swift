import Foundation
import PackagePlugin

/// Compiles the files SpeakServer serves into it: the repository's `openapi.json` (for
/// `GET /openapi.json`), the status page (`StatusPage/index.html` in the target, for `GET /`) and the
/// operator console (`Console/index.html`, for `GET /console`).
/// What a client reads is then the file in the repository, byte for byte, and an installed
/// `speakd` needs no resource files beside it.
@main
struct EmbedServedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let files = [
            (context.package.directoryURL.appending(path: "openapi.json"), "OpenAPIDocument", "json"),
            (target.directoryURL.appending(path: "StatusPage/index.html"), "StatusPage", "html"),
            (target.directoryURL.appending(path: "Console/index.html"), "OperatorConsole", "html"),
        ]
        let tool = try context.tool(named: "speakd-embed-text").url
        return files.map { input, type, property in
            let output = context.pluginWorkDirectoryURL.appending(path: "\(type)+Embedded.swift")
            return .buildCommand(
                displayName: "Embedding \(input.lastPathComponent) in \(target.name)",
                executable: tool,
                arguments: [input.path, output.path, type, property],
                inputFiles: [input],
                outputFiles: [output])
        }
    }
}
