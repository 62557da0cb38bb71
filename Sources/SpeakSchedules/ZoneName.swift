import Foundation

/// The IANA time zone names a schedule takes: those of the tz database installed under
/// `/usr/share/zoneinfo`, and nothing Foundation would also make a zone of (`GMT+01:00`,
/// `UTC+5`, a name with a NUL byte).
enum ZoneName {
    /// Where the tz database is installed.
    static let directory = "/usr/share/zoneinfo"

    /// Files in the directory that are not zones, or not zones by an IANA name.
    private static let notZones: Set<String> = ["localtime", "posixrules", "posix", "right"]

    /// The zone called `identifier`, or nil when it is not an IANA name with a zone file.
    ///
    /// The name is checked before any file is looked at: components of ASCII letters, digits,
    /// `.`, `_`, `-` and `+` between single slashes, each starting with a letter, at most 64
    /// bytes in all, so no name reaches outside the directory (`..`, a leading `/`).
    static func zone(_ identifier: String) -> TimeZone? {
        guard isWellFormed(identifier), let first = identifier.split(separator: "/").first,
            !notZones.contains(String(first))
        else { return nil }
        // A zone file starts with the magic "TZif"; the tables beside them (zone.tab) do not.
        guard let handle = FileHandle(forReadingAtPath: "\(directory)/\(identifier)") else { return nil }
        defer { try? handle.close() }
        guard let magic = try? handle.read(upToCount: 4), magic == Data("TZif".utf8) else { return nil }
        return TimeZone(identifier: identifier)
    }

    static func isWellFormed(_ identifier: String) -> Bool {
        guard (1...64).contains(identifier.utf8.count) else { return false }
        let components = identifier.split(separator: "/", omittingEmptySubsequences: false)
        return components.allSatisfy { component in
            guard let first = component.utf8.first, isLetter(first) else { return false }
            return component.utf8.allSatisfy { byte in
                isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || Array("._-+".utf8).contains(byte)
            }
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}
