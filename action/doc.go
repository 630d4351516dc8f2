// Package action holds what an action is: its contract, as an entry of the providers file's
// actions: section declares it. A contract names the provider that executes the action and
// says what the action does (its description, for an agent's tool list and the console), which
// params it accepts (a JSON Schema 2020-12), how a proposal of it is decided (the approval
// policy and its auto_approve CEL expression) and which business operation a request is (the
// business key, a CEL expression over the params). The API, the MCP tools, an operator's
// compensation and `actledger providers check` all ask a [Contract]; each rule of a contract is
// written here, once.
//
// What this package must never do:
//
//   - talk to a supplier, or know how one is reached: a contract names its provider and nothing
//     more. Package provider is the supplier adapter; it imports this package to bind each
//     action to its provider's config, never the reverse (a test holds the direction);
//   - touch Postgres or NATS, or record anything: it answers whether params fit, which key they
//     make and whether the policy approves; the API records the decision;
//   - approve on doubt: an auto_approve that fails, runs over [PolicyCostLimit] or gives anything
//     but true leaves the proposal to a person;
//   - give a key that is not one: a business key is visible text of at most [request.MaxKeyLength]
//     characters, or the params are refused naming the param it is made from.
package action
