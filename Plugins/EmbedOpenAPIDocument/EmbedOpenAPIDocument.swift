import Foundation
import PackagePlugin

/// Compiles the repository's `openapi.json` into the target that serves it, so the document a
/// client reads at `GET /openapi.json` is the file in the repository, byte for byte, and an
/// installed `speakd` needs no resource files beside it.
@main
struct EmbedOpenAPIDocument: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let document = context.package.directoryURL.appending(path: "openapi.json")
        let output = context.pluginWorkDirectoryURL.appending(path: "OpenAPIDocument+Embedded.swift")
        return [
            .buildCommand(
                displayName: "Embedding openapi.json in \(target.name)",
                executable: try context.tool(named: "speakd-embed-text").url,
                arguments: [document.path, output.path, "OpenAPIDocument", "json"],
                inputFiles: [document],
                outputFiles: [output])
        ]
    }
}
