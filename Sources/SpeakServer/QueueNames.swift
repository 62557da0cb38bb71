import AnnouncementQueue

// The queue and the wire format both name an `AnnouncementStatus`; this file imports only the
// queue, so these aliases name the queue's types unambiguously for the adapter, which imports
// only the wire types.
typealias Queue = AnnouncementQueue
typealias QueueStatus = AnnouncementStatus
typealias QueueError = AnnouncementQueueError
