/// The OpenAPI 3.1 document of speakd's HTTP API, served at `GET /openapi.json`.
///
/// The text is the repository's `openapi.json`, compiled in by the EmbedServedFiles build
/// plugin (`json`), so the served document and the file are one. The test suite checks the running
/// daemon against it with schemathesis.
public enum OpenAPIDocument {}
