from rlhf_course.grading.app import main

raise SystemExit(main())
