//! libstdc++'s heap and sort routines (`std::push_heap`, `pop_heap`, `make_heap`,
//! `sort_heap`, `std::sort`'s introsort with its final insertion sort), over indices into
//! the caller's elements with `comp(a, b)` the C++ comparator ("a goes before b" for a sort,
//! "a is below b" for a heap). TensorFlow's kernels that keep a `std::priority_queue` or
//! call `std::sort` with a comparator that leaves ties (the CTC beam's `gtl::TopN`,
//! `CombinedNonMaxSuppression`'s per-class queue and final merge) return equal elements in
//! whatever order these routines leave them: ported step for step so that ties come out as
//! TensorFlow's do on Linux.

fn push_heap_hole(a: &mut [usize], mut hole: usize, top: usize, value: usize, comp: &dyn Fn(usize, usize) -> bool) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !comp(a[parent], value) {
            break;
        }
        a[hole] = a[parent];
        hole = parent;
    }
    a[hole] = value;
}

fn adjust_heap(a: &mut [usize], mut hole: usize, len: usize, value: usize, comp: &dyn Fn(usize, usize) -> bool) {
    let top = hole;
    let mut child = hole;
    while len >= 1 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if comp(a[child], a[child - 1]) {
            child -= 1;
        }
        a[hole] = a[child];
        hole = child;
    }
    if len.is_multiple_of(2) && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    push_heap_hole(a, hole, top, value, comp);
}

pub(crate) fn make_heap(a: &mut [usize], comp: &dyn Fn(usize, usize) -> bool) {
    let len = a.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        adjust_heap(a, parent, len, a[parent], comp);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

pub(crate) fn pop_heap(a: &mut [usize], comp: &dyn Fn(usize, usize) -> bool) {
    let n = a.len();
    if n > 1 {
        let value = a[n - 1];
        a[n - 1] = a[0];
        adjust_heap(a, 0, n - 1, value, comp);
    }
}

pub(crate) fn push_heap(a: &mut [usize], comp: &dyn Fn(usize, usize) -> bool) {
    let n = a.len();
    push_heap_hole(a, n - 1, 0, a[n - 1], comp);
}

pub(crate) fn sort_heap(a: &mut [usize], comp: &dyn Fn(usize, usize) -> bool) {
    let mut n = a.len();
    while n > 1 {
        n -= 1;
        let value = a[n];
        a[n] = a[0];
        adjust_heap(a, 0, n, value, comp);
    }
}

fn unguarded_linear_insert(a: &mut [usize], mut last: usize, comp: &dyn Fn(usize, usize) -> bool) {
    let value = a[last];
    while comp(value, a[last - 1]) {
        a[last] = a[last - 1];
        last -= 1;
    }
    a[last] = value;
}

fn insertion_sort(a: &mut [usize], comp: &dyn Fn(usize, usize) -> bool) {
    for i in 1..a.len() {
        if comp(a[i], a[0]) {
            a[..=i].rotate_right(1);
        } else {
            unguarded_linear_insert(a, i, comp);
        }
    }
}

fn introsort_loop(a: &mut [usize], mut depth: u32, comp: &dyn Fn(usize, usize) -> bool) {
    let mut last = a.len();
    while last > 16 {
        if depth == 0 {
            make_heap(&mut a[..last], comp);
            sort_heap(&mut a[..last], comp);
            return;
        }
        depth -= 1;
        let v = &mut a[..last];
        let mid = last / 2;
        // move_median_to_first(0, 1, mid, last - 1)
        let (x, y, z) = (1, mid, last - 1);
        let m = if comp(v[x], v[y]) {
            if comp(v[y], v[z]) {
                y
            } else if comp(v[x], v[z]) {
                z
            } else {
                x
            }
        } else if comp(v[x], v[z]) {
            x
        } else if comp(v[y], v[z]) {
            z
        } else {
            y
        };
        v.swap(0, m);
        // unguarded_partition(1, last, pivot 0)
        let (mut f, mut l) = (1, last);
        let cut = loop {
            while comp(v[f], v[0]) {
                f += 1;
            }
            l -= 1;
            while comp(v[0], v[l]) {
                l -= 1;
            }
            if f >= l {
                break f;
            }
            v.swap(f, l);
            f += 1;
        };
        introsort_loop(&mut v[cut..], depth, comp);
        last = cut;
    }
}

/// `std::sort`.
pub(crate) fn sort(a: &mut [usize], comp: &dyn Fn(usize, usize) -> bool) {
    let n = a.len();
    if n < 2 {
        return;
    }
    introsort_loop(a, 2 * (usize::BITS - 1 - n.leading_zeros()), comp);
    if n > 16 {
        insertion_sort(&mut a[..16], comp);
        for i in 16..n {
            unguarded_linear_insert(a, i, comp);
        }
    } else {
        insertion_sort(a, comp);
    }
}
