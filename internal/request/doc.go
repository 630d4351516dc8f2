// Package request holds what every route asks of a request body before
// anything is looked up: one JSON object decoded strictly, integers the
// canonical form keeps exactly, text Postgres can store, keys people can
// tell apart by eye, and the bounds of the free-text fields. It also holds
// the agent's operation request (POST /v1/operations), whose fields are
// judged here and whose meaning is judged by the api package.
//
// The package depends on nothing of the product but internal/display, so
// that its fuzz test instruments a small binary, not the whole service.
// Its refusals are *Error values; the api package answers each as a 400
// with the error's code.
package request
