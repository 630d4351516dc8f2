package schema

// MigrateWith is Migrate with the migrations and function files given
// (functions in the order OrderFunctions returns), for tests that change,
// add or drop a file.
var MigrateWith = migrate

// OrderFunctions is the order Functions applies files in.
var OrderFunctions = orderFunctions
