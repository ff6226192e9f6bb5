// Package manualapproval is the ManualApproval Permit plugin: it holds the
// pods its args select at Permit, with their node reserved, until a person
// approves or rejects them through the pod's WaitingPod, or the approval
// window ends.
//
// Decisions outlive reservations. A decision is looked up by pod UID each
// time the pod reaches Permit, so an approval given while the pod was not
// held (before it first arrived, after its window ended, or across a
// scheduler restart) lets it through at once, and a rejection keeps it from
// taking a node again.
package manualapproval
