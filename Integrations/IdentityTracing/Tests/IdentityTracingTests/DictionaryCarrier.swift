import Instrumentation

/// Reads a `[String: String]` carrier, with case-insensitive keys as HTTP header fields have.
struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? {
        carrier.first { $0.key.lowercased() == key.lowercased() }?.value
    }
}

/// Writes into a `[String: String]` carrier.
struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}
