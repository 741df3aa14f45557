// What the README's samples stand for; see scripts/doc-samples.py. Declarations only.
// sample 2
import Foundation
import IdentityRuntime

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

func send(for identity: Identity?) async {}
func audit(_ identity: Identity?) {}
func cleanup() {}
func store(_ result: Data) {}
final class LegacyClient: Sendable {
    func fetch(_ completion: @escaping @Sendable (Data) -> Void) {}
}
let legacyClient: LegacyClient = placeholder()
