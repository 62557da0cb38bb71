import Foundation
import PackagePlugin

/// Compiles `debian/changelog` into the SpeakdVersion target, which reads speakd's version from
/// its top entry: the changelog is the one place the version is set, for the Debian package and
/// for `speak --version`, `speakd --version`, `/healthz` and the status page alike.
@main
struct EmbedVersion: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let input = context.package.directoryURL.appending(path: "debian/changelog")
        let output = context.pluginWorkDirectoryURL.appending(path: "Changelog+Embedded.swift")
        return [
            .buildCommand(
                displayName: "Embedding debian/changelog in \(target.name)",
                executable: try context.tool(named: "speakd-embed-text").url,
                arguments: [input.path, output.path, "SpeakdVersion", "changelog"],
                inputFiles: [input],
                outputFiles: [output])
        ]
    }
}
