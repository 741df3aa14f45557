// What the samples of "Identity under Swift concurrency" stand for; see scripts/doc-samples.py. Declarations only.
import IdentityRuntime

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

// sample 1
func sync() async {}

// sample 2
struct Entry: Sendable {}

// sample 3
struct Job: Sendable {
    func perform() async throws {}
}
let job: Job = placeholder()
let alice: Identity = placeholder()
let bob: Identity = placeholder()
let queue: IdentityDispatchQueue = placeholder()
