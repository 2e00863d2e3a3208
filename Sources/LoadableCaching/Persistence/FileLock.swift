#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Locks of the file and SQLite caches that hold across processes: `flock` on a file of a folder
/// of locks, on a descriptor kept open while the lock is held.
///
/// The system frees a `flock` lock when its descriptor closes, and so when the process exits or
/// dies (a kill included). A lock belongs to the open file, not to the process, so two lock
/// objects of one process on one file conflict as two processes do. Descriptors are opened
/// close-on-exec: a child process never inherits a lock. A release unlocks before it closes: a
/// child that another thread is starting holds a copy of every descriptor between its fork and
/// its `exec`, and a close alone would leave the lock held by that copy until then. Lock files
/// stay when released (removing one while another process waits for it would let two hold it);
/// each is empty.
package enum FileLock {
    /// Takes the lock named `key` in the folder of locks `folder` without waiting: the file named
    /// as the file cache names an entry's file (``FileLoadableCache/fileName(forKey:)``), so that
    /// keys Swift finds equal are one lock.
    ///
    /// - Returns: The held lock, or `nil` when another open file holds it.
    /// - Throws: ``LoadableCacheError/loadFailed(key:underlying:)`` naming the lock's path and the
    ///   system's reason when its file cannot be made or opened.
    package static func tryLock(key: String, inFolder folder: String) throws(LoadableCacheError) -> LoadableCacheLock? {
        do {
            return try tryLock(atPath: folder + "/" + FileLoadableCache.fileName(forKey: key), inFolder: folder)
        } catch {
            throw LoadableCacheError.loadFailed(key: key, underlying: error)
        }
    }

    /// Takes the lock of the file at `path` (made, with its folder `folder`, if needed) without
    /// waiting.
    ///
    /// - Returns: The held lock, or `nil` when another open file holds it (another process, or
    ///   another lock object of this one).
    /// - Throws: An error naming the path and the system's reason when the file cannot be made
    ///   or opened.
    package static func tryLock(atPath path: String, inFolder folder: String) throws -> LoadableCacheLock? {
        guard let descriptor = try lockedDescriptor(atPath: path, inFolder: folder, waiting: false) else {
            return nil
        }
        return LoadableCacheLock { unlockAndClose(descriptor) }
    }

    /// Takes the lock of the file at `path` (made, with its folder `folder`, if needed), waiting
    /// for it as long as another open file holds it: the calling thread blocks.
    ///
    /// - Returns: The held lock.
    /// - Throws: An error naming the path and the system's reason when the file cannot be made
    ///   or opened.
    package static func lock(atPath path: String, inFolder folder: String) throws -> LoadableCacheLock {
        // Waiting never gives `nil`.
        let descriptor = try lockedDescriptor(atPath: path, inFolder: folder, waiting: true)!
        return LoadableCacheLock { unlockAndClose(descriptor) }
    }

    /// A descriptor of the file at `path` holding its lock; `nil` when another holds it and
    /// `waiting` is `false`.
    ///
    /// A lock taken on a file that was removed meanwhile (its folder cleared by another process)
    /// would not conflict with a lock of the new file at the path: the file is then opened again,
    /// a few times at most.
    private static func lockedDescriptor(atPath path: String, inFolder folder: String, waiting: Bool) throws -> Int32? {
        for _ in 0..<16 {
            var descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o600)
            if descriptor < 0 && errno == ENOENT {
                try FileIO.makeFolder(atPath: folder)
                descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o600)
            }
            guard descriptor >= 0 else { throw FileIOError(operation: "open", path: path, code: errno) }
            var result = flock(descriptor, waiting ? LOCK_EX : LOCK_EX | LOCK_NB)
            while result != 0 && errno == EINTR {
                result = flock(descriptor, waiting ? LOCK_EX : LOCK_EX | LOCK_NB)
            }
            if result != 0 {
                let code = errno
                close(descriptor)
                if code == EWOULDBLOCK { return nil }
                throw FileIOError(operation: "flock", path: path, code: code)
            }
            if isStillAtPath(descriptor, path) { return descriptor }
            close(descriptor)
        }
        throw FileIOError(operation: "flock", path: path, code: ESTALE)
    }

    /// Frees the lock of `descriptor` for every copy of it (a child between fork and `exec` may
    /// hold one), then closes it.
    private static func unlockAndClose(_ descriptor: Int32) {
        _ = flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    /// Whether the file open as `descriptor` is the one at `path`.
    private static func isStillAtPath(_ descriptor: Int32, _ path: String) -> Bool {
        var opened = stat()
        var named = stat()
        guard fstat(descriptor, &opened) == 0, stat(path, &named) == 0 else { return false }
        return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino
    }
}
