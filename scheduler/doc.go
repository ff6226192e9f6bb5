// Package scheduler is the scheduling loop that runs inside the operator:
// it places pods on nodes with the framework instances that the live
// profile set (package profiles) serves.
//
// Informers feed the cache (nodes and bound pods) and the queue (pods
// waiting for a node). The loop pops one pod at a time, takes the instance
// of the pod's profile for the whole attempt, brings the snapshot up to date
// and runs PreFilter, Filter (in parallel, over an adaptive share of the
// nodes, starting where the previous search stopped), PostFilter when no
// node fits, PreScore and Score; it assumes the pod on the best node
// (random among equals), runs Reserve and Permit, and hands the pod to a
// binding goroutine (WaitOnPermit, PreBind, Bind, PostBind). A failure at
// any step releases what was taken and sends the pod back to the queue.
// Pod status updates and events are sent asynchronously, so a cycle never
// waits for the API server.
//
// The Scheduler is a controller-runtime Runnable that needs leader
// election: only the elected replica schedules. NewFramework builds
// instances wired to the loop; publishing one into the profile set makes it
// serve from the next cycle on.
package scheduler
