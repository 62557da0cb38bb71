extension Sequence<UInt8> {
    /// The bytes as lowercase hexadecimal, two digits each (`0a1f`): the token's form, and how
    /// MQTT correlation data is shown.
    public var lowercaseHex: String {
        map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}
